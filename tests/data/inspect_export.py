import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cols = [r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")]
print("NVTX_EVENTS cols:", cols)
print("tables:", [r[0] for r in db.execute("select name from sqlite_master where type='table'")])
for r in db.execute("select domainId, text, textId, count(*) from NVTX_EVENTS where eventType=75 group by 1,2,3"): print("domain", r)
pc = [c for c in cols if 'alue' in c or 'ayload' in c]
q = f"select e.eventType, e.domainId, e.text, s.value, {','.join('e.'+c for c in pc) or 'NULL'} from NVTX_EVENTS e left join StringIds s on s.id=e.textId where e.eventType=59 limit 12"
for r in db.execute(q): print([str(x)[:160] for x in r])
print("kernels", db.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone())
print("nvtx by type", db.execute("select eventType, count(*) from NVTX_EVENTS group by 1").fetchall())
for r in db.execute("select s.value from NVTX_EVENTS e join StringIds s on s.id=e.textId where e.text is null limit 3"): print("registered:", r[0][:150])
for r in db.execute("select text from NVTX_EVENTS where text like '%seq%' limit 5"): print("seqtext:", r[0][:150])
for r in db.execute("select s.value, count(*) from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id=k.shortName group by 1 order by 2 desc limit 40"): print("kernel:", r)
for r in db.execute("select * from TARGET_INFO_GPU limit 1"): print("gpu:", r)
