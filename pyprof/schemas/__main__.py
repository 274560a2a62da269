"""``python -m pyprof.schemas``: write the schema files of this folder from the code's declarations."""
from pyprof.schemas import FOLDER, generate, text

for name, schema in generate().items():
    (FOLDER / f"{name}.json").write_text(text(schema), encoding="utf-8")
    print(FOLDER / f"{name}.json")
