"""Attribution: the sweep over ranges and launch calls, each launch's enclosing ranges decoded into its op,
arguments, line, layer and forward link."""
