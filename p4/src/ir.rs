//! The program lowered for execution: every name resolved to a slot, a table, an action or an
//! extern instance at load time. Per-packet state is one array of `u128` slots (a header is its
//! validity slot followed by one slot per field; a stack is its next-index slot followed by its
//! elements; structs are their members in order), so running a packet looks nothing up by name.

/// Index of a slot in a packet's state.
pub type Slot = u32;

/// A lowered v1model program.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Slots a packet's state holds.
    pub slots: usize,
    /// Header types: their fields' widths in bits.
    pub headers: Vec<HeaderType>,
    /// The parser's states; `start` is state 0.
    pub states: Vec<State>,
    /// The verify-checksum control.
    pub verify: Vec<Op>,
    /// The ingress control.
    pub ingress: Vec<Op>,
    /// The egress control.
    pub egress: Vec<Op>,
    /// The compute-checksum control.
    pub compute: Vec<Op>,
    /// The deparser.
    pub deparser: Vec<Op>,
    /// Every table of the pipeline.
    pub tables: Vec<Table>,
    /// Every action.
    pub actions: Vec<Action>,
    /// Registers: name, cell width, size.
    pub registers: Vec<Register>,
    /// Indexed counters.
    pub counters: Vec<Counter>,
    /// `error` members in order (their codes are their indices).
    pub errors: Vec<String>,
    /// Where standard_metadata's fields live.
    pub std: StdSlots,
    /// The `@field_list(N)` annotations on the user metadata's fields.
    pub field_lists: Vec<FieldList>,
}

/// The user metadata fields one `@field_list(N)` index names: what a clone keeps of them.
#[derive(Debug, Clone)]
pub struct FieldList {
    /// N.
    pub index: u128,
    /// Each field's slots: first and count.
    pub fields: Vec<(Slot, u32)>,
}

/// A header type.
#[derive(Debug, Clone)]
pub struct HeaderType {
    /// Its name.
    pub name: String,
    /// Field names and widths.
    pub fields: Vec<(String, u16)>,
}

impl HeaderType {
    /// Its length in bits.
    pub fn bits(&self) -> u32 {
        self.fields.iter().map(|f| u32::from(f.1)).sum()
    }

    /// Slots it takes: validity and one per field.
    pub fn stride(&self) -> u32 {
        1 + self.fields.len() as u32
    }
}

/// Slots of standard_metadata's fields.
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
    /// `select`: keys (with their widths), then cases in order.
    Select {
        /// The key expressions.
        keys: Vec<Expr>,
        /// Cases: one key set per key, and the target.
        cases: Vec<(Vec<KeySet>, Target)>,
    },
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

/// A set of key values in a `select` case or a `const entries` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// An element of a stack chosen at run time.
    Element(StackRef, Box<Expr>),
    /// The stack's `next` element (extract advances the stack).
    Next(StackRef),
}

/// A header stack.
#[derive(Debug, Clone, Copy)]
pub struct StackRef {
    /// Slot of its next index; elements follow.
    pub base: Slot,
    /// Slots one element takes.
    pub stride: u32,
    /// Elements.
    pub size: u32,
    /// Element header type.
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
    /// A field of a stack element chosen at run time: the element's field `offset`.
    Element(StackRef, Box<Expr>, u32, u16),
    /// Bits `lo .. lo + width` of a place (of `full` bits).
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

/// An expression, typed at load time: every value is an unsigned `u128` already masked to its
/// width (signed values in two's complement).
#[derive(Debug, Clone)]
pub enum Expr {
    /// A constant.
    Const(u128),
    /// A slot's value.
    Slot(Slot),
    /// A field of a stack element chosen at run time.
    Element(StackRef, Box<Expr>, u32),
    /// Unary operator on a `width`-bit value.
    Unary(Unary, Box<Expr>, u16),
    /// Binary operator; `width` of the operands, `signed` for comparisons, `/`, `%` and `>>`.
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
    /// `t.apply().hit` (true) or `.miss` (false): applies the table.
    Apply(usize, bool),
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
    /// Copy `len` slots (a struct or header assignment between fixed places).
    Copy(Slot, Slot, u32),
    /// Copy a header (validity and fields) between headers that may be stack elements.
    CopyHeader(HeaderRef, HeaderRef, u32),
    /// `setValid()` (true) or `setInvalid()` (false).
    SetValid(HeaderRef, bool),
    /// `if`.
    If(Expr, Vec<Op>, Vec<Op>),
    /// `switch` on a value: cases (values, body), then the default.
    Switch(Expr, Vec<(Vec<u128>, Vec<Op>)>, Vec<Op>),
    /// Apply a table; with a `switch (t.apply().action_run)`, its cases.
    Apply(usize, Option<Box<ActionSwitch>>),
    /// Call an action with its arguments; then copy its `out`/`inout` parameters back.
    Call(usize, Vec<Expr>, Vec<(Place, Slot)>),
    /// An extern.
    Extern(Box<Extern>),
    /// `exit`.
    Exit,
    /// `return` (from an action or a control).
    Return,
    /// `packet.extract(h)`.
    Extract(HeaderRef, usize),
    /// `packet.advance(bits)`.
    Advance(Expr),
    /// `verify(condition, error)`.
    Verify(Expr, u128),
    /// `packet.emit(h)`.
    Emit(HeaderRef, usize),
    /// `stack.push_front(n)`.
    PushFront(StackRef, u32),
    /// `stack.pop_front(n)`.
    PopFront(StackRef, u32),
}

/// The cases of a switch: (labels, body) in order, then the default body.
pub type SwitchCases<T> = (Vec<(Vec<T>, Vec<Op>)>, Vec<Op>);

/// The cases of `switch (t.apply().action_run)`, labelled by action.
pub type ActionSwitch = SwitchCases<usize>;

/// v1model's hash and checksum algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// CRC-32 (IEEE), as BMv2's `crc32`.
    Crc32,
    /// CRC-16/ARC, as BMv2's `crc16`.
    Crc16,
    /// The Internet checksum.
    Csum16,
    /// The first 8 bytes as an integer.
    Identity,
    /// XOR of 16-bit words.
    Xor16,
}

/// One item of a field list (for hashes and checksums): a value of `width` bits, skipped when
/// its header (`valid`) is invalid, as BMv2 does.
#[derive(Debug, Clone)]
pub struct ListItem {
    /// The value.
    pub value: Expr,
    /// Its width.
    pub width: u16,
    /// Validity slot of the header it belongs to.
    pub valid: Option<Slot>,
}

/// An extern call.
#[derive(Debug, Clone)]
pub enum Extern {
    /// `mark_to_drop(standard_metadata)`.
    MarkToDrop,
    /// `hash(result, algo, base, data, max)`.
    Hash {
        /// Result.
        out: Place,
        /// Algorithm.
        algo: Algorithm,
        /// Added to the hash.
        base: Expr,
        /// Fields.
        data: Vec<ListItem>,
        /// The hash is taken modulo this (when not 0).
        max: Expr,
    },
    /// `verify_checksum` / `update_checksum` (with or without payload).
    Checksum {
        /// Verify (true) or update (false).
        verify: bool,
        /// Only when this holds.
        condition: Expr,
        /// Fields.
        data: Vec<ListItem>,
        /// The checksum field.
        field: Place,
        /// Its current value.
        current: Expr,
        /// Algorithm.
        algo: Algorithm,
        /// The payload after the parsed headers is summed too.
        payload: bool,
    },
    /// `register.read(out, index)`.
    RegisterRead(usize, Place, Expr),
    /// `register.write(index, value)`.
    RegisterWrite(usize, Expr, Expr),
    /// `counter.count(index)`.
    Count(usize, Expr),
    /// `clone(I2E, session)` and `clone_preserving_field_list(I2E, session, list)`.
    Clone {
        /// The clone session.
        session: Expr,
        /// The `@field_list` index whose user metadata the clone keeps, if any.
        field_list: Option<u128>,
    },
    /// `truncate(length)`.
    Truncate(Expr),
    /// `log_msg(format, args)`.
    Log(String, Vec<Expr>),
    /// `random(out, lo, hi)`.
    Random(Place, Expr, Expr),
    /// `assert(condition)` / `assume(condition)`.
    Assert(Expr),
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

/// A table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Control-plane name.
    pub name: String,
    /// Keys: expression, match kind, width, control-plane name.
    pub keys: Vec<Key>,
    /// Actions it may run (indices into `Program::actions`).
    pub actions: Vec<usize>,
    /// Default action and its arguments.
    pub default_action: (usize, Vec<u128>),
    /// The default cannot be changed by the control plane.
    pub const_default: bool,
    /// Entries from the source (`const entries`): the table cannot be changed.
    pub const_entries: Option<Vec<Entry>>,
    /// `size`.
    pub size: usize,
    /// The direct counter attached (`counters = ...`), if any.
    pub direct_counter: bool,
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

/// A table entry: a key set per key, a priority (larger wins), the action and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// One match per key.
    pub matches: Vec<KeySet>,
    /// Priority (larger wins; `const entries` in source order).
    pub priority: i64,
    /// The action.
    pub action: usize,
    /// Its arguments.
    pub args: Vec<u128>,
}

/// An action.
#[derive(Debug, Clone)]
pub struct Action {
    /// Control-plane name.
    pub name: String,
    /// Parameters: name, slot, width, and whether the control plane supplies it.
    pub params: Vec<Param>,
    /// The body.
    pub body: Vec<Op>,
}

/// An action parameter.
#[derive(Debug, Clone)]
pub struct Param {
    /// Name.
    pub name: String,
    /// Where its value lives while the action runs.
    pub slot: Slot,
    /// Width.
    pub width: u16,
    /// Supplied by the control plane (directionless).
    pub control_plane: bool,
    /// `out` or `inout`: copied back to the argument after the call.
    pub copy_back: bool,
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
}

/// An indexed counter array.
#[derive(Debug, Clone)]
pub struct Counter {
    /// Control-plane name.
    pub name: String,
    /// Cells.
    pub size: usize,
}
