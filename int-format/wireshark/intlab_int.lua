-- intlab INT-MD v2.1 dissector for Wireshark/tshark (Lua 5.2+, Wireshark 3.6 or newer).
--
-- Decodes the INT shim, the INT-MD header and every hop of the stack (newest first), with
-- intlab's domain-specific block (domain 0x494C: txBytes and line rate), then hands the rest to
-- the dissector registered for the original UDP destination port (RoCEv2 on 4791).
--
--   tshark -X lua_script:int-format/wireshark/intlab_int.lua -r capture.pcapng
--   tshark ... -o intlab_int.port:6000      (INT on another UDP port)
--
-- Units: qlen and buffer occupancy bytes; ts, ingress_ts and hop_latency ns; tx_bytes bytes;
-- rate kb/s. All-ones means "unavailable" (INT v2.1).

local p = Proto("intlab_int", "In-band Network Telemetry (INT-MD v2.1, intlab)")

local DEFAULT_PORT = 5790
local INTLAB_DOMAIN = 0x494C

local int_types = { [1] = "INT-MD", [2] = "INT-Destination", [3] = "INT-MX" }

local f = {
    type = ProtoField.uint8("intlab_int.type", "Type", base.DEC, int_types, 0xF0),
    npt = ProtoField.uint8("intlab_int.npt", "Next protocol type", base.DEC, nil, 0x0C),
    shim_len = ProtoField.uint8("intlab_int.shim_len", "Length (words)", base.DEC),
    orig_port = ProtoField.uint16("intlab_int.orig_port", "Original UDP destination port", base.DEC),
    version = ProtoField.uint8("intlab_int.version", "Version", base.DEC, nil, 0xF0),
    d = ProtoField.bool("intlab_int.d", "D (discard)", 8, nil, 0x08),
    e = ProtoField.bool("intlab_int.e", "E (max hop count exceeded)", 8, nil, 0x04),
    m = ProtoField.bool("intlab_int.m", "M (MTU exceeded)", 8, nil, 0x02),
    hop_ml = ProtoField.uint8("intlab_int.hop_ml", "Hop ML (words)", base.DEC, nil, 0x1F),
    rhc = ProtoField.uint8("intlab_int.rhc", "Remaining hop count", base.DEC),
    bitmap = ProtoField.uint16("intlab_int.bitmap", "Instruction bitmap", base.HEX),
    domain_id = ProtoField.uint16("intlab_int.domain_id", "Domain specific ID", base.HEX),
    ds_instructions = ProtoField.uint16("intlab_int.ds_instructions", "DS instructions", base.HEX),
    ds_flags = ProtoField.uint16("intlab_int.ds_flags", "DS flags", base.HEX),
    hops = ProtoField.uint8("intlab_int.hops", "Hops in stack", base.DEC),
    hop = ProtoField.uint8("intlab_int.hop", "Hop (1 = newest)", base.DEC),
    node_id = ProtoField.uint32("intlab_int.node_id", "Node ID", base.DEC),
    ingress_port = ProtoField.uint16("intlab_int.ingress_port", "L1 ingress port", base.DEC),
    egress_port = ProtoField.uint16("intlab_int.egress_port", "L1 egress port", base.DEC),
    hop_latency = ProtoField.uint32("intlab_int.hop_latency", "Hop latency (ns)", base.DEC),
    queue_id = ProtoField.uint8("intlab_int.queue_id", "Queue ID", base.DEC),
    qlen = ProtoField.uint24("intlab_int.qlen", "Queue occupancy (bytes)", base.DEC),
    ingress_ts = ProtoField.uint64("intlab_int.ingress_ts", "Ingress timestamp (ns)", base.DEC),
    ts = ProtoField.uint64("intlab_int.ts", "Egress timestamp (ns)", base.DEC),
    l2_ingress_port = ProtoField.uint32("intlab_int.l2_ingress_port", "L2 ingress port", base.DEC),
    l2_egress_port = ProtoField.uint32("intlab_int.l2_egress_port", "L2 egress port", base.DEC),
    tx_utilization = ProtoField.uint32("intlab_int.tx_utilization", "Egress Tx utilization", base.DEC),
    buffer_id = ProtoField.uint8("intlab_int.buffer_id", "Buffer ID", base.DEC),
    buffer_occupancy = ProtoField.uint24("intlab_int.buffer_occupancy", "Buffer occupancy (bytes)", base.DEC),
    reserved = ProtoField.bytes("intlab_int.reserved", "Reserved instruction data"),
    checksum_complement = ProtoField.uint32("intlab_int.checksum_complement", "Checksum complement", base.HEX),
    tx_bytes = ProtoField.uint64("intlab_int.tx_bytes", "Transmitted bytes before this frame", base.DEC),
    rate = ProtoField.uint32("intlab_int.rate", "Line rate (kb/s)", base.DEC),
}

local field_list = {}
for _, v in pairs(f) do table.insert(field_list, v) end
p.fields = field_list

local ef_malformed = ProtoExpert.new("intlab_int.malformed", "Malformed INT", expert.group.MALFORMED, expert.severity.ERROR)
p.experts = { ef_malformed }

p.prefs.port = Pref.uint("UDP port", DEFAULT_PORT, "UDP destination port that signals INT (NPT=1)")

local function bit(bitmap, n)
    return bit32.band(bitmap, bit32.rshift(0x8000, n)) ~= 0
end

-- Adds one hop's fields in bitmap order, then intlab's DS block, then the checksum complement.
local function add_hop(tree, tvb, bitmap, domain, ds)
    local o = 0
    if bit(bitmap, 0) then tree:add(f.node_id, tvb(o, 4)); o = o + 4 end
    if bit(bitmap, 1) then
        tree:add(f.ingress_port, tvb(o, 2)); tree:add(f.egress_port, tvb(o + 2, 2)); o = o + 4
    end
    if bit(bitmap, 2) then tree:add(f.hop_latency, tvb(o, 4)); o = o + 4 end
    if bit(bitmap, 3) then
        tree:add(f.queue_id, tvb(o, 1)); tree:add(f.qlen, tvb(o + 1, 3)); o = o + 4
    end
    if bit(bitmap, 4) then tree:add(f.ingress_ts, tvb(o, 8)); o = o + 8 end
    if bit(bitmap, 5) then tree:add(f.ts, tvb(o, 8)); o = o + 8 end
    if bit(bitmap, 6) then
        tree:add(f.l2_ingress_port, tvb(o, 4)); tree:add(f.l2_egress_port, tvb(o + 4, 4)); o = o + 8
    end
    if bit(bitmap, 7) then tree:add(f.tx_utilization, tvb(o, 4)); o = o + 4 end
    if bit(bitmap, 8) then
        tree:add(f.buffer_id, tvb(o, 1)); tree:add(f.buffer_occupancy, tvb(o + 1, 3)); o = o + 4
    end
    for n = 9, 14 do
        if bit(bitmap, n) then tree:add(f.reserved, tvb(o, 4)); o = o + 4 end
    end
    if domain == INTLAB_DOMAIN then
        if bit(ds, 0) then tree:add(f.tx_bytes, tvb(o, 8)); o = o + 8 end
        if bit(ds, 1) then tree:add(f.rate, tvb(o, 4)); o = o + 4 end
    end
    if bit(bitmap, 15) then tree:add(f.checksum_complement, tvb(o, 4)) end
end

function p.dissector(tvb, pinfo, tree)
    if tvb:len() < 16 then return 0 end
    local shim_words = tvb(1, 1):uint()
    local total = 4 + shim_words * 4
    local root = tree:add(p, tvb(0, math.min(total, tvb:len())))
    if tvb:len() < total or shim_words < 3 then
        root:add_proto_expert_info(ef_malformed, "INT length exceeds the datagram")
        return tvb:len()
    end
    pinfo.cols.protocol = "INT"

    local shim = root:add(tvb(0, 4), "Shim")
    shim:add(f.type, tvb(0, 1))
    shim:add(f.npt, tvb(0, 1))
    shim:add(f.shim_len, tvb(1, 1))
    local npt = bit32.rshift(bit32.band(tvb(0, 1):uint(), 0x0C), 2)
    local orig_port = tvb(2, 2):uint()
    if npt == 1 then shim:add(f.orig_port, tvb(2, 2)) end

    local md = root:add(tvb(4, 12), "INT-MD header")
    md:add(f.version, tvb(4, 1))
    md:add(f.d, tvb(4, 1))
    md:add(f.e, tvb(4, 1))
    md:add(f.m, tvb(4, 1))
    md:add(f.hop_ml, tvb(6, 1))
    md:add(f.rhc, tvb(7, 1))
    md:add(f.bitmap, tvb(8, 2))
    md:add(f.domain_id, tvb(10, 2))
    md:add(f.ds_instructions, tvb(12, 2))
    md:add(f.ds_flags, tvb(14, 2))

    local hop_len = bit32.band(tvb(6, 1):uint(), 0x1F) * 4
    local bitmap = tvb(8, 2):uint()
    local domain = tvb(10, 2):uint()
    local ds = tvb(12, 2):uint()
    local stack_len = total - 16
    local nhops = 0
    if hop_len > 0 then nhops = math.floor(stack_len / hop_len) end
    root:add(f.hops, nhops):set_generated()
    if hop_len > 0 and stack_len % hop_len ~= 0 then
        root:add_proto_expert_info(ef_malformed, "stack is not a whole number of hops")
    end
    for i = 1, nhops do
        local at = 16 + (i - 1) * hop_len
        local hop = root:add(tvb(at, hop_len), "Hop " .. i)
        hop:add(f.hop, i):set_generated()
        add_hop(hop, tvb(at, hop_len):tvb(), bitmap, domain, ds)
    end
    root:append_text(string.format(", %d hop%s", nhops, nhops == 1 and "" or "s"))

    if npt == 1 and tvb:len() > total then
        local next = DissectorTable.get("udp.port"):get_dissector(orig_port)
        if next ~= nil then
            local ok = pcall(function() next:call(tvb(total):tvb(), pinfo, tree) end)
            if ok then return tvb:len() end
        end
        Dissector.get("data"):call(tvb(total):tvb(), pinfo, tree)
    end
    return tvb:len()
end

local registered_port = nil
local function register()
    local udp = DissectorTable.get("udp.port")
    if registered_port ~= nil then udp:remove(registered_port, p) end
    registered_port = p.prefs.port
    udp:add(registered_port, p)
end

function p.prefs_changed()
    if registered_port ~= p.prefs.port then register() end
end

register()
