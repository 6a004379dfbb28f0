"""The P4Info names the controller depends on are exactly the ones
p4src/README.md documents: every table, action (with its parameters), match
field, action profile, counter, direct counter and register of the compiled
program is in the README, and every name the README gives exists."""

import os
import re

from fs_common import FsTest
from fs_p4rt import P4Info

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "p4src", "README.md")


class P4InfoNamesDocumented(FsTest):
    """README <-> P4Info, both directions."""

    SWITCHES = ()

    def runTest(self):
        info = P4Info(self.params["p4info"]).info
        text = open(README).read()
        documented = set(re.findall(r"`(Fs(?:Ingress|Egress)\.[A-Za-z0-9_.]+)", text))
        objects = {}
        for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters",
                     "meters", "direct_meters", "registers"):
            for o in getattr(info, kind):
                objects[o.preamble.name] = (kind, o)
        # NoAction comes from core.p4; everything of ours is FsIngress/FsEgress.
        missing = sorted(n for n in objects if n not in documented and n != "NoAction")
        self.assertEqual(missing, [], "P4Info objects missing from p4src/README.md")
        unknown = sorted(n for n in documented if n not in objects)
        self.assertEqual(unknown, [], "README names that are not in the P4Info")

        # Actions: documented parameter lists match.
        for name, params in re.findall(r"`(Fs(?:Ingress|Egress)\.[A-Za-z0-9_.]+)\(([^)]*)\)`",
                                       text):
            kind, o = objects[name]
            self.assertEqual(kind, "actions", name)
            want = [p.strip() for p in params.split(",") if p.strip()]
            self.assertEqual([p.name for p in o.params], want, name)
        # Tables: documented key fields and sizes match.
        rows = re.findall(r"^\| `(Fs(?:Ingress|Egress)\.[A-Za-z0-9_.]+)` \| ([^|]*)\| "
                          r"([^|]*)\| ([^|]*)\|", text, re.M)
        seen_tables = set()
        for name, key, _actions, size in rows:
            kind, o = objects[name]
            if kind != "tables":
                continue
            seen_tables.add(name)
            want = re.findall(r"`([a-z0-9_]+)`", key)
            self.assertEqual([m.name for m in o.match_fields], want, name)
            self.assertEqual(o.size, int(size.strip()), "%s size" % name)
        self.assertEqual(seen_tables, {t.preamble.name for t in info.tables})
