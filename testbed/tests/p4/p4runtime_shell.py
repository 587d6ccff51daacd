"""Fills P4 switches' tables over P4Runtime with p4runtime-shell, as its users script it:
setup (arbitration and SetForwardingPipelineConfig), TableEntry inserts, a read back, teardown.

    python p4runtime_shell.py PLAN.json

PLAN.json: {"p4info": PATH, "device_config": PATH,
            "switches": [{"address": "127.0.0.1:50051", "device_id": 0,
                          "entries": [{"table": T, "action": A, "match": {F: V}, "params": {P: V}}]}]}
Prints one line per switch with the entries read back; exits 1 if a read differs.
"""

import json
import sys

import p4runtime_sh.shell as sh


def main():
    plan = json.load(open(sys.argv[1]))
    config = sh.FwdPipeConfig(plan["p4info"], plan["device_config"])
    for s in plan["switches"]:
        sh.setup(device_id=s["device_id"], grpc_addr=s["address"], election_id=(0, 1), config=config)
        tables = set()
        for e in s["entries"]:
            te = sh.TableEntry(e["table"])(action=e["action"])
            for field, value in e["match"].items():
                te.match[field] = value
            for param, value in e["params"].items():
                te.action[param] = str(value)
            te.insert()
            tables.add(e["table"])
        read = sum(len(list(sh.TableEntry(t).read())) for t in tables)
        print(f"{s['address']} device {s['device_id']}: {len(s['entries'])} written, {read} read back")
        sh.teardown()
        if read != len(s["entries"]):
            sys.exit(1)


if __name__ == "__main__":
    main()
