//! The program lowered for execution: every name resolved to a slot, a table, an action or an
//! extern instance at load time; every call inlined; every side effect of an expression made
//! a statement of its own, in P4's order. Per-packet state is one array of `u128` slots (a
//! header is its validity slot, one slot per field, then its varbit's data; a stack is its
//! next-index slot followed by its elements; structs and unions are their members in order),
//! so running a packet looks nothing up by name.

pub mod ops;

/// Index of a slot in a packet's state.
pub type Slot = u32;

/// The architecture a program is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arch {
    /// v1model (BMv2's simple_switch).
    #[default]
    V1Model,
    /// The Portable Switch Architecture (BMv2's psa_switch).
    Psa,
}

/// A lowered program.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Its architecture.
    pub arch: Arch,
    /// Slots a packet's state holds.
    pub slots: usize,
    /// Header types.
    pub headers: Vec<HeaderType>,
    /// The blocks of the pipeline, in the package's order.
    pub blocks: Vec<Block>,
    /// Every table of the pipeline.
    pub tables: Vec<Table>,
    /// Every action a table may run (one per table and action).
    pub actions: Vec<Action>,
    /// Actions the code calls directly (inlined where called), once per name: P4Info lists
    /// them beside the tables' actions.
    pub called_actions: Vec<CalledAction>,
    /// Registers.
    pub registers: Vec<Register>,
    /// Indexed counters (and direct counters, whose cells are their table's entries).
    pub counters: Vec<Counter>,
    /// Meters (indexed and direct).
    pub meters: Vec<Meter>,
    /// Action profiles and selectors.
    pub profiles: Vec<Profile>,
    /// Parser value sets.
    pub value_sets: Vec<ValueSet>,
    /// Digest types: what each `digest` call sends.
    pub digests: Vec<Digest>,
    /// `error` members in order (their codes are their indices).
    pub errors: Vec<String>,
    /// Where the architecture's metadata fields live.
    pub std: StdSlots,
    /// PSA's metadata fields (PSA programs only).
    pub psa: Option<PsaSlots>,
    /// Field lists: what a clone, resubmit or recirculation keeps.
    pub field_lists: Vec<FieldList>,
    /// The slots of the parsed headers the blocks share (first, count): what an
    /// egress-to-egress clone keeps of its original.
    pub hdr: (Slot, u32),
    /// The slots of each header inside the user metadata (first, count), which an
    /// egress-to-egress clone keeps too: BMv2 resets metadata fields there, not headers.
    pub meta_headers: Vec<(Slot, u32)>,
    /// Serializable enums (`enum bit<8> Reason_t { ... }`), in declaration order: controllers
    /// read their members' values from the P4Info.
    pub serializable_enums: Vec<SerializableEnum>,
    /// The ids `@id` annotations ask for, by control-plane name (P4Info gives them).
    pub ids: std::collections::BTreeMap<String, u32>,
}

/// An enum with an underlying type: its members have the values written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerializableEnum {
    /// Its name.
    pub name: String,
    /// The underlying type's width in bits.
    pub width: u16,
    /// Members and their values, in declaration order.
    pub members: Vec<(String, u128)>,
}

impl Program {
    /// The block of kind `kind`, if the program has one.
    pub fn block(&self, kind: BlockKind) -> Option<&Block> {
        self.blocks.iter().find(|b| b.kind == kind)
    }

    /// The code of control `kind` (empty when the program has no such block).
    pub fn control(&self, kind: BlockKind) -> &[Op] {
        match self.block(kind).map(|b| &b.body) {
            Some(BlockBody::Control(ops)) => ops,
            _ => &[],
        }
    }
}

/// What a block of the architecture's package is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// The (ingress) parser.
    Parser,
    /// v1model's VerifyChecksum.
    Verify,
    /// Ingress.
    Ingress,
    /// Egress.
    Egress,
    /// v1model's ComputeChecksum.
    Compute,
    /// The (egress) deparser.
    Deparser,
    /// PSA's ingress deparser.
    IngressDeparser,
    /// PSA's egress parser.
    EgressParser,
}

/// One block of the pipeline.
#[derive(Debug, Clone)]
pub struct Block {
    /// Its place in the package.
    pub kind: BlockKind,
    /// Its name (the parser's or control's declared name).
    pub name: String,
    /// Its code.
    pub body: BlockBody,
}

/// A parser's states or a control's statements.
#[derive(Debug, Clone)]
pub enum BlockBody {
    /// The states; `start` is state 0.
    Parser(Vec<State>),
    /// The statements.
    Control(Vec<Op>),
}

/// What a clone, resubmit or recirculation keeps of a packet's metadata.
#[derive(Debug, Clone)]
pub struct FieldList {
    /// The `@field_list(N)` index, or an index of intlab's for a list written in the call.
    pub index: u128,
    /// Each field's slots: first and count.
    pub fields: Vec<(Slot, u32)>,
}

/// A header type.
#[derive(Debug, Clone)]
pub struct HeaderType {
    /// Its name.
    pub name: String,
    /// Field names and widths (a varbit's maximum width).
    pub fields: Vec<(String, u16)>,
    /// The field that is a varbit, if any: its slot holds its length in bits, and its data the
    /// [`HeaderType::varbit_chunks`] slots right after it (the first bits at the top of the
    /// first).
    pub varbit: Option<usize>,
    /// `@controller_header("NAME")`: the header of packets to or from the controller.
    pub controller_header: Option<String>,
}

impl HeaderType {
    /// Its length in bits (with an empty varbit).
    pub fn bits(&self) -> u32 {
        self.fields
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != self.varbit)
            .map(|(_, f)| u32::from(f.1))
            .sum()
    }

    /// Slots of varbit data (128 bits each).
    pub fn varbit_chunks(&self) -> u32 {
        self.varbit.map_or(0, |i| u32::from(self.fields[i].1).div_ceil(128))
    }

    /// Slots it takes: validity, one per field, and the varbit's data.
    pub fn stride(&self) -> u32 {
        1 + self.fields.len() as u32 + self.varbit_chunks()
    }

    /// The slot of field `i`, counted from the header's validity slot.
    pub fn field_slot(&self, i: usize) -> u32 {
        let after_varbit = self.varbit.is_some_and(|v| i > v);
        1 + i as u32 + if after_varbit { self.varbit_chunks() } else { 0 }
    }
}

/// Slots of PSA's metadata fields that the switch reads or writes, by the struct they belong
/// to (BMv2's psa_switch sets and reads the same).
#[derive(Debug, Clone, Copy, Default)]
pub struct PsaSlots {
    /// `psa_ingress_parser_input_metadata_t`: ingress_port, packet_path.
    pub parser_in: [Slot; 2],
    /// `psa_ingress_input_metadata_t`: ingress_port, packet_path, ingress_timestamp,
    /// parser_error.
    pub ingress_in: [Slot; 4],
    /// `psa_ingress_output_metadata_t`: class_of_service, clone, clone_session_id, drop,
    /// resubmit, multicast_group, egress_port.
    pub ingress_out: [Slot; 7],
    /// `psa_egress_parser_input_metadata_t`: egress_port, packet_path.
    pub egress_parser_in: [Slot; 2],
    /// `psa_egress_input_metadata_t`: class_of_service, egress_port, packet_path, instance,
    /// egress_timestamp, parser_error.
    pub egress_in: [Slot; 6],
    /// `psa_egress_output_metadata_t`: clone, clone_session_id, drop.
    pub egress_out: [Slot; 3],
    /// `psa_egress_deparser_input_metadata_t`: egress_port.
    pub deparser_in: Slot,
    /// Egress's own headers and metadata (first slot, count): zeroed as a frame enters egress,
    /// whose parser fills them from the frame.
    pub egress_state: (Slot, u32),
}

/// Slots of the architecture's metadata fields. For v1model these are `standard_metadata`'s;
/// for PSA, slots of its own that the executor uses as it uses v1model's (parser_error,
/// packet_length), beside [`PsaSlots`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StdSlots {
    /// `ingress_port`.
    pub ingress_port: Slot,
    /// `egress_spec`.
    pub egress_spec: Slot,
    /// `egress_port`.
    pub egress_port: Slot,
    /// `instance_type`.
    pub instance_type: Slot,
    /// `packet_length`.
    pub packet_length: Slot,
    /// `enq_timestamp`.
    pub enq_timestamp: Slot,
    /// `enq_qdepth`.
    pub enq_qdepth: Slot,
    /// `deq_timedelta`.
    pub deq_timedelta: Slot,
    /// `deq_qdepth`.
    pub deq_qdepth: Slot,
    /// `ingress_global_timestamp`.
    pub ingress_global_timestamp: Slot,
    /// `egress_global_timestamp`.
    pub egress_global_timestamp: Slot,
    /// `mcast_grp`.
    pub mcast_grp: Slot,
    /// `egress_rid`.
    pub egress_rid: Slot,
    /// `checksum_error`.
    pub checksum_error: Slot,
    /// `parser_error`.
    pub parser_error: Slot,
    /// `priority`.
    pub priority: Slot,
    /// `qid`.
    pub qid: Slot,
}

/// A parser state.
#[derive(Debug, Clone)]
pub struct State {
    /// Its name, for traces.
    pub name: String,
    /// Its statements.
    pub ops: Vec<Op>,
    /// Where it goes.
    pub next: Next,
}

/// Where a parser state goes.
#[derive(Debug, Clone)]
pub enum Next {
    /// Fixed target.
    To(Target),
    /// `select`: keys, then cases in order.
    Select {
        /// The key expressions.
        keys: Vec<Expr>,
        /// Cases: what they match, and the target.
        cases: Vec<(CaseMatch, Target)>,
    },
}

/// What a `select` case matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseMatch {
    /// One key set per key.
    Keys(Vec<KeySet>),
    /// The members of a value set (all keys together).
    ValueSet(usize),
}

/// A transition target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The parser accepts.
    Accept,
    /// The parser rejects.
    Reject,
    /// Another state.
    State(usize),
}

/// A set of key values in a `select` case or a table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySet {
    /// `_` or `default`.
    Any,
    /// One value.
    Value(u128),
    /// `value &&& mask`.
    Mask(u128, u128),
    /// `lo .. hi`.
    Range(u128, u128),
}

impl KeySet {
    /// Whether `v` is in the set.
    pub fn contains(&self, v: u128) -> bool {
        match *self {
            KeySet::Any => true,
            KeySet::Value(x) => v == x,
            KeySet::Mask(x, m) => v & m == x & m,
            KeySet::Range(lo, hi) => lo <= v && v <= hi,
        }
    }
}

/// A header (or header-stack element) a statement acts on as a whole.
#[derive(Debug, Clone)]
pub enum HeaderRef {
    /// A header at a fixed base slot (its validity slot).
    Fixed(Slot),
    /// A header `offset` slots into an element of a stack chosen at run time.
    Element(StackRef, Box<Expr>, u32),
    /// A header `offset` slots into the stack's `next` element (extract advances the stack).
    Next(StackRef, u32),
}

/// A header stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackRef {
    /// Slot of its next index; elements follow.
    pub base: Slot,
    /// Slots one element takes.
    pub stride: u32,
    /// Elements.
    pub size: u32,
    /// Element header type (of a stack of headers; a union stack's first member's).
    pub header: usize,
}

impl StackRef {
    /// Base slot of element `i`.
    pub fn element(&self, i: u32) -> Slot {
        self.base + 1 + i * self.stride
    }

    /// Base slot of element `i` computed at run time, when the stack has one.
    pub fn element_in(&self, i: u128) -> Option<Slot> {
        (i < u128::from(self.size)).then(|| self.element(i as u32))
    }
}

/// Something a value is written to.
#[derive(Debug, Clone)]
pub enum Place {
    /// A slot, masked to `width` bits.
    Slot(Slot, u16),
    /// A slot `offset` slots into an element of a stack chosen at run time, masked to `width`.
    Element(StackRef, Box<Expr>, u32, u16),
    /// Bits `lo .. lo + width` of a place.
    Slice(Box<Place>, u16, u16),
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    /// `!`
    Not,
    /// `~`
    Complement,
    /// `-`
    Negate,
}

/// Binary operators on `width`-bit values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `|+|`
    AddSat,
    /// `|-|`
    SubSat,
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`
    LogicalAnd,
    /// `||`
    LogicalOr,
}

/// An expression, typed at load time and free of side effects: every value is an unsigned
/// `u128` already masked to its width (signed values in two's complement).
#[derive(Debug, Clone)]
pub enum Expr {
    /// A constant.
    Const(u128),
    /// A slot's value.
    Slot(Slot),
    /// A slot `offset` slots into an element of a stack chosen at run time (0 when the index
    /// is out of range).
    Element(StackRef, Box<Expr>, u32),
    /// Unary operator on a `width`-bit value.
    Unary(Unary, Box<Expr>, u16),
    /// Binary operator; `width` of the operands, `signed` for comparisons, `/`, `%`, `>>` and
    /// the saturating operators.
    Binary(Binary, Box<Expr>, Box<Expr>, u16, bool),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Bits `lo .. lo + width`.
    Slice(Box<Expr>, u16, u16),
    /// Bits `lo .. lo + width` of a slot: the commonest slice (`hdr.f[3:3]`) as one node.
    SlotBits(Slot, u16, u16),
    /// A binary operator (not `&&` or `||`) with a constant right operand, as one node.
    BinaryConst(Binary, Box<Expr>, u128, u16, bool),
    /// `a ++ b`, b of `width` bits.
    Concat(Box<Expr>, Box<Expr>, u16),
    /// A value of `from` bits, sign-extended (if `signed`) and cut to `to` bits.
    Cast(Box<Expr>, u16, u16, bool),
    /// Whether a header is valid.
    IsValid(HeaderRef),
    /// `packet.lookahead<bit<W>>()` (skip 0), or a field of `packet.lookahead<H>()`: the
    /// `width` bits that start `skip` bits past the parser's cursor, without moving it.
    Lookahead {
        /// Bits past the cursor where the value starts.
        skip: u16,
        /// Its width in bits.
        width: u16,
        /// Bits the looked-at type has (a header's whole length): fewer left is PacketTooShort.
        need: u32,
    },
    /// `packet.length()`: the frame's length in bytes.
    PacketLength,
    /// One of intlab's exact values (`intlab_metadata` methods).
    Intlab(IntlabValue),
}

/// intlab's values that v1model has no field for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntlabValue {
    /// Bytes queued at the egress port when the frame started transmission.
    QueueBytes,
    /// Bytes sent on the egress port before this frame.
    TxBytes,
    /// Departure (ns).
    DepartureNs,
    /// Arrival (ns).
    ArrivalNs,
    /// Line rate (kb/s).
    LineRateKbps,
    /// INT node id.
    NodeId,
    /// Egress MTU (bytes of IP packet).
    Mtu,
}

/// A statement.
#[derive(Debug, Clone)]
pub enum Op {
    /// `place = value`.
    Set(Place, Expr),
    /// Copy `len` slots (an aggregate between fixed places): to, from, len.
    Copy(Slot, Slot, u32),
    /// Copy a header (validity, fields and varbit data) between headers that may be stack
    /// elements: to, from, slots.
    CopyHeader(HeaderRef, HeaderRef, u32),
    /// `setValid()` (true) or `setInvalid()` (false).
    SetValid(HeaderRef, bool),
    /// `if`.
    If(Expr, Vec<Op>, Vec<Op>),
    /// `switch` on a value: cases (values, body), then the default.
    Switch(Expr, Vec<(Vec<u128>, Vec<Op>)>, Vec<Op>),
    /// Apply a table; writes whether it hit (1 or 0) and the action it ran (its index in
    /// `Program::actions`) to the slots given.
    Apply {
        /// The table.
        table: usize,
        /// Where `hit` goes.
        hit: Option<Slot>,
        /// Where `action_run` goes.
        action_run: Option<Slot>,
    },
    /// An inlined call (action, function, control): runs `body` (a `return` ends it), then
    /// `copy_out` however it ended, then goes on unless the body exited.
    Scope {
        /// The callee's statements.
        body: Vec<Op>,
        /// Its `out` and `inout` parameters copied back.
        copy_out: Vec<Op>,
    },
    /// A loop: runs `body` while `cond` holds (after `prep`), `update` after each pass;
    /// `break` and `continue` act on it.
    Loop {
        /// Statements that compute the condition.
        prep: Vec<Op>,
        /// The condition.
        cond: Expr,
        /// The body.
        body: Vec<Op>,
        /// Run after each pass (and after `continue`).
        update: Vec<Op>,
    },
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// An extern.
    Extern(Box<Extern>),
    /// `exit`.
    Exit,
    /// `return` (from a call, or from a control's apply).
    Return,
    /// `packet.extract(h)`.
    Extract(HeaderRef, usize),
    /// `packet.extract(h, bits)` of a header with a varbit.
    ExtractVar(HeaderRef, usize, Expr),
    /// `packet.advance(bits)`.
    Advance(Expr),
    /// `verify(condition, error)`.
    Verify(Expr, Expr),
    /// The parser rejects with this error (a failed check, `transition reject` inside a
    /// sub-parser).
    Reject(u128),
    /// `packet.emit(h)`.
    Emit(HeaderRef, usize),
    /// `stack.push_front(n)`.
    PushFront(StackRef, u32),
    /// `stack.pop_front(n)`.
    PopFront(StackRef, u32),
}

/// The cases of a switch: (labels, body) in order, then the default body.
pub type SwitchCases<T> = (Vec<(Vec<T>, Vec<Op>)>, Vec<Op>);

/// Hash and checksum algorithms (v1model's `HashAlgorithm`, PSA's `PSA_HashAlgorithm_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// CRC-32 (IEEE), as BMv2's `crc32`.
    Crc32,
    /// BMv2's `crc32_custom` with its default parameters (those of `crc32`).
    Crc32Custom,
    /// CRC-16/ARC, as BMv2's `crc16`.
    Crc16,
    /// BMv2's `crc16_custom` with its default parameters (those of `crc16`).
    Crc16Custom,
    /// The Internet checksum.
    Csum16,
    /// The first 8 bytes as an integer.
    Identity,
    /// XOR of 16-bit words.
    Xor16,
    /// A random value.
    Random,
}

/// One item of a field list (for hashes, checksums and digests): a value of `width` bits,
/// skipped when its header (`valid`) is invalid, as BMv2 does.
#[derive(Debug, Clone)]
pub struct ListItem {
    /// The value (for a varbit, the slot of its length: its bits follow).
    pub value: Expr,
    /// Its width (a varbit's maximum).
    pub width: u16,
    /// Validity slot of the header it belongs to.
    pub valid: Option<Slot>,
    /// A varbit: as many bits as its length slot says.
    pub varbit: bool,
}

/// Which pass of the pipeline a clone copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloneKind {
    /// Ingress to egress: the frame as it arrived, parsed again.
    IngressToEgress,
    /// Egress to egress: the frame as egress left it.
    EgressToEgress,
}

/// An extern call: as lowered, its arguments expressions (`E`), places (`P`) and field list
/// items (`I`); the executor instantiates it again over its compiled forms.
#[derive(Debug, Clone)]
pub enum Extern<E = Expr, P = Place, I = ListItem> {
    /// `mark_to_drop(standard_metadata)`.
    MarkToDrop,
    /// `hash(result, algo, base, data, max)`.
    Hash {
        /// Result.
        out: P,
        /// Algorithm.
        algo: Algorithm,
        /// Added to the hash.
        base: E,
        /// Fields.
        data: Vec<I>,
        /// The hash is taken modulo this (when not 0).
        max: E,
        /// Width of the result (the hash is cut to it before the modulo, as BMv2 does).
        width: u16,
    },
    /// `verify_checksum` / `update_checksum` (with or without payload).
    Checksum {
        /// Verify (true) or update (false).
        verify: bool,
        /// Only when this holds.
        condition: E,
        /// Fields.
        data: Vec<I>,
        /// The checksum field.
        field: P,
        /// Its current value.
        current: E,
        /// Its width.
        width: u16,
        /// Algorithm.
        algo: Algorithm,
        /// The payload after the parsed headers is summed too.
        payload: bool,
    },
    /// A checksum or hash computed as a value (`Checksum16.get`, PSA's `Hash.get_hash`).
    HashValue {
        /// Result.
        out: P,
        /// Algorithm.
        algo: Algorithm,
        /// Fields.
        data: Vec<I>,
        /// Width of the result.
        width: u16,
        /// Added to the hash (with `max`).
        base: E,
        /// The hash is taken modulo this (when not 0).
        max: E,
        /// The field list is packed with its padding in front, ending on a byte boundary
        /// (PSA's `Hash`, as psa_switch packs it), not after it.
        right_aligned: bool,
    },
    /// PSA's incremental checksum objects: `clear`, `add`, `subtract`, `get`, `get_state`,
    /// `set_state` on the state in `state` (a slot of its own).
    ChecksumState {
        /// The object's state slot.
        state: Slot,
        /// What to do.
        op: ChecksumOp,
        /// Algorithm.
        algo: Algorithm,
        /// Fields added or subtracted.
        data: Vec<I>,
        /// Result of `get`/`get_state`, or the value of `set_state`.
        value: Option<P>,
        /// The value `set_state` sets.
        input: Option<E>,
    },
    /// `register.read(out, index)`: leaves `out` as it was when the index is out of range.
    RegisterRead(usize, P, E),
    /// `register.write(index, value)`: ignored when the index is out of range.
    RegisterWrite(usize, E, E),
    /// `counter.count(index)`.
    Count(usize, E),
    /// `meter.execute_meter(index, result)` (a direct meter: `read(result)`, index None).
    Meter {
        /// The meter.
        meter: usize,
        /// The cell (None: the direct meter's cell of the entry its table hit).
        index: Option<E>,
        /// Where the color goes.
        out: P,
        /// The color in PSA's encoding (RED 0, GREEN 1, YELLOW 2) rather than BMv2's (GREEN
        /// 0, YELLOW 1, RED 2). PSA's color-aware form is run color-blind, as psa_switch runs
        /// it.
        psa_colors: bool,
    },
    /// `clone`, `clone3` and `clone_preserving_field_list`.
    Clone {
        /// Which.
        kind: CloneKind,
        /// The clone session.
        session: E,
        /// The field list whose metadata the clone keeps, if any.
        field_list: Option<u128>,
    },
    /// `resubmit` and `resubmit_preserving_field_list`.
    Resubmit(Option<u128>),
    /// `recirculate` and `recirculate_preserving_field_list`.
    Recirculate(Option<u128>),
    /// `digest(receiver, data)`.
    Digest {
        /// The digest type.
        digest: usize,
        /// Its values.
        data: Vec<I>,
    },
    /// `truncate(length)`.
    Truncate(E),
    /// `log_msg(format, args)`.
    Log(String, Vec<E>),
    /// `random(out, lo, hi)`.
    Random(P, E, E),
    /// `assert(condition)` / `assume(condition)`.
    Assert(E),
}

impl<E, P, I> Extern<E, P, I> {
    /// The same call with every argument converted: expressions by `e`, places by `p`, field
    /// list items by `i`.
    pub fn map<E2, P2, I2>(
        &self,
        e: &impl Fn(&E) -> E2,
        p: &impl Fn(&P) -> P2,
        i: &impl Fn(&I) -> I2,
    ) -> Extern<E2, P2, I2> {
        let items = |data: &[I]| data.iter().map(i).collect();
        match self {
            Extern::MarkToDrop => Extern::MarkToDrop,
            Extern::Hash {
                out,
                algo,
                base,
                data,
                max,
                width,
            } => Extern::Hash {
                out: p(out),
                algo: *algo,
                base: e(base),
                data: items(data),
                max: e(max),
                width: *width,
            },
            Extern::Checksum {
                verify,
                condition,
                data,
                field,
                current,
                width,
                algo,
                payload,
            } => Extern::Checksum {
                verify: *verify,
                condition: e(condition),
                data: items(data),
                field: p(field),
                current: e(current),
                width: *width,
                algo: *algo,
                payload: *payload,
            },
            Extern::HashValue {
                out,
                algo,
                data,
                width,
                base,
                max,
                right_aligned,
            } => Extern::HashValue {
                out: p(out),
                algo: *algo,
                data: items(data),
                width: *width,
                base: e(base),
                max: e(max),
                right_aligned: *right_aligned,
            },
            Extern::ChecksumState {
                state,
                op,
                algo,
                data,
                value,
                input,
            } => Extern::ChecksumState {
                state: *state,
                op: *op,
                algo: *algo,
                data: items(data),
                value: value.as_ref().map(p),
                input: input.as_ref().map(e),
            },
            Extern::RegisterRead(r, out, at) => Extern::RegisterRead(*r, p(out), e(at)),
            Extern::RegisterWrite(r, at, v) => Extern::RegisterWrite(*r, e(at), e(v)),
            Extern::Count(c, at) => Extern::Count(*c, e(at)),
            Extern::Meter {
                meter,
                index,
                out,
                psa_colors,
            } => Extern::Meter {
                meter: *meter,
                index: index.as_ref().map(e),
                out: p(out),
                psa_colors: *psa_colors,
            },
            Extern::Clone {
                kind,
                session,
                field_list,
            } => Extern::Clone {
                kind: *kind,
                session: e(session),
                field_list: *field_list,
            },
            Extern::Resubmit(l) => Extern::Resubmit(*l),
            Extern::Recirculate(l) => Extern::Recirculate(*l),
            Extern::Digest { digest, data } => Extern::Digest {
                digest: *digest,
                data: items(data),
            },
            Extern::Truncate(n) => Extern::Truncate(e(n)),
            Extern::Log(format, values) => Extern::Log(format.clone(), values.iter().map(e).collect()),
            Extern::Random(out, lo, hi) => Extern::Random(p(out), e(lo), e(hi)),
            Extern::Assert(c) => Extern::Assert(e(c)),
        }
    }
}

/// What a PSA checksum object's method does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumOp {
    /// `clear()`.
    Clear,
    /// `add(data)`.
    Add,
    /// `subtract(data)`.
    Subtract,
    /// `get()`.
    Get,
    /// `get_state()`.
    GetState,
    /// `set_state(value)`.
    SetState,
}

/// Match kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// `exact`.
    Exact,
    /// `lpm`.
    Lpm,
    /// `ternary`.
    Ternary,
    /// `range`.
    Range,
    /// `optional`.
    Optional,
}

impl MatchKind {
    /// The kind as P4 names it.
    pub fn name(self) -> &'static str {
        match self {
            MatchKind::Exact => "exact",
            MatchKind::Lpm => "lpm",
            MatchKind::Ternary => "ternary",
            MatchKind::Range => "range",
            MatchKind::Optional => "optional",
        }
    }
}

/// A table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Control-plane name.
    pub name: String,
    /// Statements that compute the keys' values into slots, run before each lookup.
    pub prep: Vec<Op>,
    /// Keys: expression, match kind, width, control-plane name.
    pub keys: Vec<Key>,
    /// `selector` keys: hashed to choose a member of an action selector's group.
    pub selector_keys: Vec<(Expr, u16)>,
    /// Actions it may run (indices into `Program::actions`), with their scope.
    pub actions: Vec<TableAction>,
    /// Default action (its index in `Program::actions`) and its arguments.
    pub default_action: (usize, Vec<u128>),
    /// The default cannot be changed by the control plane.
    pub const_default: bool,
    /// Entries from the source: their list, and whether the control plane may add others.
    pub entries: Option<(Vec<Entry>, bool)>,
    /// `size`.
    pub size: usize,
    /// The direct counter attached (`counters = ...`), if any.
    pub direct_counter: Option<usize>,
    /// The direct meter attached (`meters = ...`), if any.
    pub direct_meter: Option<usize>,
    /// The action profile or selector that holds its actions, if any.
    pub profile: Option<usize>,
    /// `support_timeout = true`: entries age and are reported idle.
    pub idle_timeout: bool,
}

impl Table {
    /// Whether the table's entries need a priority (a ternary, range or optional key).
    pub fn needs_priority(&self) -> bool {
        self.keys
            .iter()
            .any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional))
    }
}

/// One action of a table's action list.
#[derive(Debug, Clone)]
pub struct TableAction {
    /// The action (index into `Program::actions`).
    pub action: usize,
    /// `@defaultonly`: only as the default action.
    pub default_only: bool,
    /// `@tableonly`: never as the default action.
    pub table_only: bool,
}

/// An action a control calls directly, as the control plane names it (its arguments are all
/// given where it is called, so the control plane supplies none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalledAction {
    /// Control-plane name.
    pub name: String,
    /// Its annotations as P4Info lists them.
    pub annotations: Vec<String>,
}

/// A table key.
#[derive(Debug, Clone)]
pub struct Key {
    /// What is matched.
    pub expr: Expr,
    /// How.
    pub kind: MatchKind,
    /// Width in bits.
    pub width: u16,
    /// Control-plane name.
    pub name: String,
}

/// A table entry: a key set per key, a priority (larger wins), the action (its index in
/// `Program::actions`) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// One match per key.
    pub matches: Vec<KeySet>,
    /// Priority (larger wins).
    pub priority: i64,
    /// The action.
    pub action: usize,
    /// Its arguments.
    pub args: Vec<u128>,
}

/// An action as a table runs it.
#[derive(Debug, Clone)]
pub struct Action {
    /// Control-plane name.
    pub name: String,
    /// Parameters the control plane supplies: name, slot, width.
    pub params: Vec<Param>,
    /// Its annotations as P4Info lists them (`@noWarn("unused")`).
    pub annotations: Vec<String>,
    /// The body.
    pub body: Vec<Op>,
}

/// A control-plane parameter of an action.
#[derive(Debug, Clone)]
pub struct Param {
    /// Name.
    pub name: String,
    /// Where its value lives while the action runs.
    pub slot: Slot,
    /// Width.
    pub width: u16,
}

/// A register array.
#[derive(Debug, Clone)]
pub struct Register {
    /// Control-plane name.
    pub name: String,
    /// Cell width.
    pub width: u16,
    /// Cells.
    pub size: usize,
    /// What each cell holds before anything is written, and after a reset (PSA's
    /// `Register(size, initial_value)`; 0 otherwise).
    pub init: u128,
}

/// What a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterKind {
    /// Packets.
    Packets,
    /// Bytes.
    Bytes,
    /// Both.
    PacketsAndBytes,
}

/// A counter array (or a direct counter: its cells are its table's entries).
#[derive(Debug, Clone)]
pub struct Counter {
    /// Control-plane name.
    pub name: String,
    /// Cells (0 for a direct counter).
    pub size: usize,
    /// What it counts.
    pub kind: CounterKind,
    /// The table it is attached to, for a direct counter.
    pub table: Option<usize>,
}

/// A meter array (or a direct meter).
#[derive(Debug, Clone)]
pub struct Meter {
    /// Control-plane name.
    pub name: String,
    /// Cells (0 for a direct meter).
    pub size: usize,
    /// Whether it meters bytes (else packets).
    pub bytes: bool,
    /// The table it is attached to, for a direct meter.
    pub table: Option<usize>,
}

/// An action profile, or an action selector (with its hash).
#[derive(Debug, Clone)]
pub struct Profile {
    /// Control-plane name.
    pub name: String,
    /// Members it may hold.
    pub size: usize,
    /// For a selector: the hash algorithm and the bits of it used.
    pub selector: Option<(Algorithm, u16)>,
}

/// A parser value set.
#[derive(Debug, Clone)]
pub struct ValueSet {
    /// Control-plane name.
    pub name: String,
    /// Widths of its members' fields.
    pub widths: Vec<u16>,
    /// For a struct's members: each field's name and its `@match` kind (exact unless given).
    pub fields: Vec<(String, MatchKind)>,
    /// Members it may hold.
    pub size: usize,
}

/// What one `digest` call site sends: the field names and widths of its data.
#[derive(Debug, Clone)]
pub struct Digest {
    /// The type's name (P4Info's).
    pub name: String,
    /// The receiver argument.
    pub receiver: u128,
    /// Field names and widths.
    pub fields: Vec<(String, u16)>,
}

/// All ones in the low `w` bits.
pub fn mask(w: u16) -> u128 {
    if w >= 128 { u128::MAX } else { (1u128 << w) - 1 }
}
