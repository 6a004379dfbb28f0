"""A small P4Runtime client for the PTF tests (p4runtime 1.4 Python stubs).

Only what the tests need: mastership, pipeline push, table entries (exact,
LPM, ternary, keyless defaults), action-profile members and groups, clone
sessions, indirect and direct counters. Names resolve against the P4Info by
fully qualified name ("FsIngress.routing.ipv4_lpm"), by alias, or by a unique
dotted suffix ("routing.ipv4_lpm"), so the tests exercise the names the
controller uses.
"""

import ipaddress
import queue
import threading

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


class P4RuntimeTestError(Exception):
    pass


def encode_value(value, bitwidth):
    """Canonical P4Runtime bytestring (no leading zero bytes) of an int,
    an IPv4 address "a.b.c.d" or a MAC "aa:bb:cc:dd:ee:ff"."""
    if isinstance(value, bytes):
        value = int.from_bytes(value, "big")
    elif isinstance(value, str):
        if ":" in value:
            value = int(value.replace(":", ""), 16)
        else:
            value = int(ipaddress.IPv4Address(value))
    value = int(value)
    if value < 0 or value >= (1 << bitwidth):
        raise P4RuntimeTestError("value %r does not fit in %d bits" % (value, bitwidth))
    nbytes = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(nbytes, "big")


def _int(value):
    if isinstance(value, str):
        if ":" in value:
            return int(value.replace(":", ""), 16)
        return int(ipaddress.IPv4Address(value))
    return int(value)


class P4Info:
    def __init__(self, path):
        self.info = p4info_pb2.P4Info()
        with open(path) as f:
            text_format.Merge(f.read(), self.info)

    @staticmethod
    def _find(objs, name, kind):
        matches = [o for o in objs if o.preamble.name == name or o.preamble.alias == name]
        if not matches:
            matches = [o for o in objs if o.preamble.name.endswith("." + name)]
        if len(matches) != 1:
            names = sorted(o.preamble.name for o in objs)
            raise P4RuntimeTestError(
                "%s %r: %s (have %s)" % (kind, name, "ambiguous" if matches else "not found", names))
        return matches[0]

    def table(self, name):
        return self._find(self.info.tables, name, "table")

    def action(self, name):
        return self._find(self.info.actions, name, "action")

    def action_profile(self, name):
        return self._find(self.info.action_profiles, name, "action profile")

    def counter(self, name):
        return self._find(self.info.counters, name, "counter")

    def direct_counter(self, name):
        return self._find(self.info.direct_counters, name, "direct counter")

    def register(self, name):
        return self._find(self.info.registers, name, "register")

    @staticmethod
    def match_field(table, name):
        for mf in table.match_fields:
            if mf.name == name:
                return mf
        raise P4RuntimeTestError("table %s has no match field %r (has %s)" % (
            table.preamble.name, name, [m.name for m in table.match_fields]))

    @staticmethod
    def param(action, name):
        for p in action.params:
            if p.name == name:
                return p
        raise P4RuntimeTestError("action %s has no parameter %r (has %s)" % (
            action.preamble.name, name, [p.name for p in action.params]))


class Switch:
    """One P4Runtime connection to one BMv2 device."""

    def __init__(self, name, addr, device_id, p4info_path, bmv2_json_path):
        self.name = name
        self.addr = addr
        self.device_id = device_id
        self.p4info = P4Info(p4info_path)
        self.bmv2_json_path = bmv2_json_path
        self.election_id = p4runtime_pb2.Uint128(high=0, low=1)
        self.channel = None
        self.stub = None
        self._requests = queue.Queue()
        self._responses = queue.Queue()
        self._stream = None
        self._reader = None

    # -- connection -------------------------------------------------------
    def connect(self, timeout=10):
        self.channel = grpc.insecure_channel(self.addr)
        grpc.channel_ready_future(self.channel).result(timeout=timeout)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)

        def requests():
            while True:
                item = self._requests.get()
                if item is None:
                    return
                yield item

        self._stream = self.stub.StreamChannel(requests())

        def read():
            try:
                for response in self._stream:
                    self._responses.put(response)
            except grpc.RpcError:
                pass

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(self.election_id)
        self._requests.put(req)
        try:
            resp = self._responses.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeTestError("%s: no arbitration response" % self.name)
        if not resp.HasField("arbitration") or resp.arbitration.status.code != 0:
            raise P4RuntimeTestError("%s: not primary: %s" % (self.name, resp))

    def disconnect(self):
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self.channel is not None:
            self.channel.close()

    def set_pipeline(self):
        """Push P4Info + BMv2 JSON; this also resets all tables, counters and
        registers, so every test starts from a clean switch."""
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.election_id.CopyFrom(self.election_id)
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(self.p4info.info)
        with open(self.bmv2_json_path, "rb") as f:
            req.config.p4_device_config = f.read()
        self.stub.SetForwardingPipelineConfig(req)

    # -- writes -----------------------------------------------------------
    def write(self, *updates):
        req = p4runtime_pb2.WriteRequest()
        req.device_id = self.device_id
        req.election_id.CopyFrom(self.election_id)
        req.updates.extend(updates)
        try:
            self.stub.Write(req)
        except grpc.RpcError as e:
            raise P4RuntimeTestError("%s: write failed: %s %s" % (
                self.name, e.code(), e.details())) from None

    @staticmethod
    def _update(kind, entity_setter):
        update = p4runtime_pb2.Update()
        update.type = kind
        entity_setter(update.entity)
        return update

    def _action(self, action_name, params):
        action_info = self.p4info.action(action_name)
        action = p4runtime_pb2.Action()
        action.action_id = action_info.preamble.id
        for pname, value in (params or {}).items():
            p_info = P4Info.param(action_info, pname)
            param = action.params.add()
            param.param_id = p_info.id
            param.value = encode_value(value, p_info.bitwidth)
        if len(action.params) != len(action_info.params):
            raise P4RuntimeTestError("action %s needs params %s" % (
                action_name, [p.name for p in action_info.params]))
        return action

    def table_entry(self, table_name, match=None, action=None, params=None,
                    priority=None, member_id=None, group_id=None, default=False,
                    meter=None):
        """match: {field: value} for exact, {field: (value, prefix_len)} for
        LPM, {field: (value, mask)} for ternary (omit a field for don't-care).
        meter: (cir, cburst, pir, pburst) of the table's direct meter."""
        table = self.p4info.table(table_name)
        entry = p4runtime_pb2.TableEntry()
        entry.table_id = table.preamble.id
        for fname, value in (match or {}).items():
            mf_info = P4Info.match_field(table, fname)
            mf = entry.match.add()
            mf.field_id = mf_info.id
            kind = mf_info.match_type
            if kind == p4info_pb2.MatchField.EXACT:
                mf.exact.value = encode_value(value, mf_info.bitwidth)
            elif kind == p4info_pb2.MatchField.LPM:
                addr, plen = value
                v = _int(addr)
                host_bits = mf_info.bitwidth - plen
                v = (v >> host_bits) << host_bits if host_bits > 0 else v
                mf.lpm.value = encode_value(v, mf_info.bitwidth)
                mf.lpm.prefix_len = plen
            elif kind == p4info_pb2.MatchField.TERNARY:
                v, mask = _int(value[0]), _int(value[1])
                mf.ternary.value = encode_value(v & mask, mf_info.bitwidth)
                mf.ternary.mask = encode_value(mask, mf_info.bitwidth)
            else:
                raise P4RuntimeTestError("unsupported match kind %s" % kind)
        if priority is not None:
            entry.priority = priority
        if default:
            entry.is_default_action = True
        if action is not None:
            entry.action.action.CopyFrom(self._action(action, params))
        elif member_id is not None:
            entry.action.action_profile_member_id = member_id
        elif group_id is not None:
            entry.action.action_profile_group_id = group_id
        if meter is not None:
            cfg = entry.meter_config
            cfg.cir, cfg.cburst, cfg.pir, cfg.pburst = meter
        return entry

    def insert(self, table_name, match=None, action=None, params=None, **kw):
        entry = self.table_entry(table_name, match, action, params, **kw)
        self.write(self._update(p4runtime_pb2.Update.INSERT,
                                lambda e: e.table_entry.CopyFrom(entry)))
        return entry

    def modify(self, table_name, match=None, action=None, params=None, **kw):
        entry = self.table_entry(table_name, match, action, params, **kw)
        self.write(self._update(p4runtime_pb2.Update.MODIFY,
                                lambda e: e.table_entry.CopyFrom(entry)))
        return entry

    def delete(self, entry):
        self.write(self._update(p4runtime_pb2.Update.DELETE,
                                lambda e: e.table_entry.CopyFrom(entry)))

    def set_default(self, table_name, action, params=None):
        entry = self.table_entry(table_name, action=action, params=params, default=True)
        self.write(self._update(p4runtime_pb2.Update.MODIFY,
                                lambda e: e.table_entry.CopyFrom(entry)))

    def add_member(self, profile_name, member_id, action, params):
        prof = self.p4info.action_profile(profile_name)
        member = p4runtime_pb2.ActionProfileMember()
        member.action_profile_id = prof.preamble.id
        member.member_id = member_id
        member.action.CopyFrom(self._action(action, params))
        self.write(self._update(p4runtime_pb2.Update.INSERT,
                                lambda e: e.action_profile_member.CopyFrom(member)))

    def add_group(self, profile_name, group_id, member_ids, max_size=0):
        prof = self.p4info.action_profile(profile_name)
        group = p4runtime_pb2.ActionProfileGroup()
        group.action_profile_id = prof.preamble.id
        group.group_id = group_id
        group.max_size = max_size
        for mid in member_ids:
            m = group.members.add()
            m.member_id = mid
            m.weight = 1
        self.write(self._update(p4runtime_pb2.Update.INSERT,
                                lambda e: e.action_profile_group.CopyFrom(group)))

    def set_clone_session(self, session_id, replicas):
        """replicas: [(egress_port, instance)]."""
        def fill(entity):
            cs = entity.packet_replication_engine_entry.clone_session_entry
            cs.session_id = session_id
            for port, instance in replicas:
                r = cs.replicas.add()
                r.egress_port = port
                r.instance = instance
        self.write(self._update(p4runtime_pb2.Update.INSERT, fill))

    def delete_clone_session(self, session_id):
        def fill(entity):
            entity.packet_replication_engine_entry.clone_session_entry.session_id = session_id
        self.write(self._update(p4runtime_pb2.Update.DELETE, fill))

    # -- reads ------------------------------------------------------------
    def _read(self, entity_setter):
        req = p4runtime_pb2.ReadRequest()
        req.device_id = self.device_id
        entity = req.entities.add()
        entity_setter(entity)
        out = []
        for resp in self.stub.Read(req):
            out.extend(resp.entities)
        return out

    def read_counter(self, counter_name, index):
        """(packets, bytes) of one cell of an indirect counter."""
        cid = self.p4info.counter(counter_name).preamble.id

        def fill(entity):
            entity.counter_entry.counter_id = cid
            entity.counter_entry.index.index = index
        entities = self._read(fill)
        if len(entities) != 1:
            raise P4RuntimeTestError("counter %s[%d]: %d entities" % (
                counter_name, index, len(entities)))
        data = entities[0].counter_entry.data
        return data.packet_count, data.byte_count

    def read_entries(self, table_name, with_meter=False):
        """Every entry of a table, as the switch reports them (with their
        direct meter's configuration if asked: PI returns it only then)."""
        tid = self.p4info.table(table_name).preamble.id

        def fill(entity):
            entity.table_entry.table_id = tid
            if with_meter:
                entity.table_entry.meter_config.SetInParent()
        return [e.table_entry for e in self._read(fill)]

    def read_default(self, table_name):
        """A table's default entry."""
        tid = self.p4info.table(table_name).preamble.id

        def fill(entity):
            entity.table_entry.table_id = tid
            entity.table_entry.is_default_action = True
        return self._read(fill)[0].table_entry

    def read_direct_counter(self, entry):
        """(packets, bytes) of the direct counter of a table entry."""
        def fill(entity):
            entity.direct_counter_entry.table_entry.CopyFrom(entry)
        entities = self._read(fill)
        if len(entities) != 1:
            raise P4RuntimeTestError("direct counter: %d entities" % len(entities))
        data = entities[0].direct_counter_entry.data
        return data.packet_count, data.byte_count
