//! The program as written: declarations, statements and expressions of P4_16 with their
//! positions, before any name is resolved or any type computed.

use super::lexer::IntLit;
use super::source::Pos;

/// A whole program after preprocessing.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Top-level declarations in order.
    pub decls: Vec<Decl>,
}

/// An annotation: `@name("...")`, `@priority(3)`, `@pragma ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// The annotation's name.
    pub name: String,
    /// Its arguments as expressions, when its body is a list of them.
    pub args: Vec<Expr>,
    /// Its body as written, between the parentheses or brackets (for P4Info).
    pub body: String,
    /// Where it is.
    pub pos: Pos,
}

/// The annotations P4Info lists as text (`@noWarn("unused")`): all but `@name`, `@id` and the
/// documentation ones, which P4Info gives fields of their own.
pub fn p4info_annotations(annotations: &[Annotation]) -> Vec<String> {
    annotations
        .iter()
        .filter(|a| !matches!(a.name.as_str(), "name" | "id" | "brief" | "description"))
        .map(|a| {
            if a.body.is_empty() && a.args.is_empty() {
                format!("@{}", a.name)
            } else {
                format!("@{}({})", a.name, a.body)
            }
        })
        .collect()
}

/// The value of `@name(...)`-like annotations with one string argument.
pub fn annotation_string(annotations: &[Annotation], name: &str) -> Option<String> {
    annotations
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| match a.args.first() {
            Some(Expr {
                kind: ExprKind::Str(s), ..
            }) => Some(s.clone()),
            _ => None,
        })
}

/// The value of an annotation with one integer argument (`@id(0x02000001)`, macros expanded).
pub fn annotation_int(annotations: &[Annotation], name: &str) -> Option<u128> {
    annotations
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| match a.args.as_slice() {
            [
                Expr {
                    kind: ExprKind::Int(i), ..
                },
            ] => Some(i.value),
            _ => None,
        })
}

/// A type as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// `bit<W>` (or `bit` alone, one bit).
    Bit(Box<Expr>),
    /// `int<W>`.
    Int(Box<Expr>),
    /// `varbit<W>`.
    Varbit(Box<Expr>),
    /// `bool`.
    Bool,
    /// `error`.
    Error,
    /// `string`.
    String,
    /// `void`.
    Void,
    /// `int` without width (compile-time integers).
    InfInt,
    /// `match_kind`.
    MatchKind,
    /// `_` (don't care).
    DontCare,
    /// A named type (`.name` written as `name`), with type arguments if any.
    Named(String, Vec<Type>, Pos),
    /// A header stack `T[n]`.
    Stack(Box<Type>, Box<Expr>),
    /// `tuple<...>`.
    Tuple(Vec<Type>),
    /// `list<T>`.
    List(Box<Type>),
}

/// A field of a header, header union or struct.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Its type.
    pub ty: Type,
    /// Its name.
    pub name: String,
    /// Where it is declared.
    pub pos: Pos,
}

/// Direction of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// None written.
    None,
    /// `in`.
    In,
    /// `out`.
    Out,
    /// `inout`.
    InOut,
}

/// A parameter of a parser, control, action, function, extern method or package.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Annotations (`@optional`).
    pub annotations: Vec<Annotation>,
    /// Direction.
    pub direction: Direction,
    /// Type.
    pub ty: Type,
    /// Name.
    pub name: String,
    /// Default value, if any.
    pub default: Option<Expr>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A method, function, constructor or block-type signature.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Return type (None for constructors).
    pub ret: Option<Type>,
    /// Name.
    pub name: String,
    /// Type parameters.
    pub type_params: Vec<String>,
    /// Parameters.
    pub params: Vec<Param>,
    /// `abstract` (a method an instance implements).
    pub is_abstract: bool,
    /// Where it is declared.
    pub pos: Pos,
}

/// What kind of block type a [`Decl::BlockType`] declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `parser`.
    Parser,
    /// `control`.
    Control,
    /// `package`.
    Package,
}

/// A top-level declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Decl {
    /// `const T name = value;`
    Const(ConstDecl),
    /// `typedef T name;` (`newtype`: `type T name;`).
    Typedef {
        /// Annotations.
        annotations: Vec<Annotation>,
        /// The aliased type.
        ty: Type,
        /// The new name.
        name: String,
        /// `type` (a new type) rather than `typedef`.
        newtype: bool,
        /// Where it is declared.
        pos: Pos,
    },
    /// `header`, `header_union` or `struct`.
    Aggregate(Aggregate),
    /// `enum [bit<W>] name { ... }`.
    Enum(EnumDecl),
    /// `error { ... }` (adds to the error set).
    Error(Vec<(String, Pos)>),
    /// `match_kind { ... }`.
    MatchKind(Vec<(String, Pos)>),
    /// `extern name<T> { methods }`.
    ExternObject(ExternDecl),
    /// `extern R f<T>(...);`
    ExternFunction(Signature),
    /// A parser or control type without body, or a package type.
    BlockType {
        /// Which.
        kind: BlockKind,
        /// Its name, type parameters and parameters.
        sig: Signature,
    },
    /// A parser with its states.
    Parser(ParserDecl),
    /// A control with its body.
    Control(ControlDecl),
    /// An action outside any control.
    Action(ActionDecl),
    /// A function with a body.
    Function(FunctionDecl),
    /// `Type(args) name;` at top level (`main`).
    Instance(Instance),
}

/// `extern name<T> { methods }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Type parameters.
    pub type_params: Vec<String>,
    /// Constructors (`ret` None) and methods.
    pub methods: Vec<Signature>,
    /// Where it is declared.
    pub pos: Pos,
}

/// `const T name = value;`
#[derive(Debug, Clone, PartialEq)]
pub struct ConstDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Type.
    pub ty: Type,
    /// Name.
    pub name: String,
    /// Value.
    pub value: Expr,
    /// Where it is declared.
    pub pos: Pos,
}

/// Which kind of aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateKind {
    /// `header`.
    Header,
    /// `header_union`.
    HeaderUnion,
    /// `struct`.
    Struct,
}

/// A header, header union or struct type.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    /// Which kind.
    pub kind: AggregateKind,
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Type parameters (`struct S<T>`).
    pub type_params: Vec<String>,
    /// Fields in order.
    pub fields: Vec<Field>,
    /// Where it is declared.
    pub pos: Pos,
}

/// An enum, serializable when it has an underlying type.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// `bit<W>` of a serializable enum.
    pub underlying: Option<Type>,
    /// Members, with values for serializable enums.
    pub members: Vec<(String, Option<Expr>, Pos)>,
    /// Where it is declared.
    pub pos: Pos,
}

/// `Type(args) name;`
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// The type instantiated.
    pub ty: Type,
    /// Constructor arguments.
    pub args: Vec<Arg>,
    /// Name.
    pub name: String,
    /// Implementations of the extern's abstract methods (`= { ... }`).
    pub body: Vec<FunctionDecl>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A parser.
#[derive(Debug, Clone, PartialEq)]
pub struct ParserDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Type parameters.
    pub type_params: Vec<String>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Constructor parameters.
    pub ctor_params: Vec<Param>,
    /// Local declarations (constants, variables, instances, value sets).
    pub locals: Vec<Stmt>,
    /// States in order.
    pub states: Vec<State>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A parser state.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Statements before the transition.
    pub body: Vec<Stmt>,
    /// Where it goes next (`reject` when the state has no transition).
    pub transition: Transition,
    /// Where it is declared.
    pub pos: Pos,
}

/// A state's transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// `transition name;`
    Direct(String, Pos),
    /// `transition select(exprs) { keyset: state; ... }`
    Select {
        /// What is matched.
        on: Vec<Expr>,
        /// Cases in order: key set, state, where.
        cases: Vec<(Expr, String, Pos)>,
        /// Where the select is.
        pos: Pos,
    },
}

/// A control.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Type parameters.
    pub type_params: Vec<String>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Constructor parameters.
    pub ctor_params: Vec<Param>,
    /// Actions, tables, variables, constants and instances, in order.
    pub locals: Vec<ControlLocal>,
    /// The `apply` block.
    pub apply: Vec<Stmt>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A declaration inside a control.
#[derive(Debug, Clone, PartialEq)]
pub enum ControlLocal {
    /// An action.
    Action(ActionDecl),
    /// A table.
    Table(TableDecl),
    /// A variable, constant or instance (as a statement).
    Stmt(Stmt),
}

/// An action.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Parameters (directionless ones come from the control plane).
    pub params: Vec<Param>,
    /// Body.
    pub body: Vec<Stmt>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A function with a body.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionDecl {
    /// Its return type, name, type parameters and parameters.
    pub sig: Signature,
    /// Body.
    pub body: Vec<Stmt>,
}

/// A table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Its properties in order.
    pub properties: Vec<TableProperty>,
    /// Where it is declared.
    pub pos: Pos,
}

/// One property of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum TableProperty {
    /// `key = { ... }`.
    Key(Vec<TableKey>, Pos),
    /// `actions = { ... }`.
    Actions(Vec<ActionRef>, Pos),
    /// `[const] entries = { ... }`.
    Entries {
        /// Written `const entries`.
        is_const: bool,
        /// The entries in order.
        entries: Vec<Entry>,
        /// Where.
        pos: Pos,
    },
    /// `[const] name = value;` (`default_action`, `size`, `implementation`, ...).
    Value {
        /// Annotations.
        annotations: Vec<Annotation>,
        /// Written `const`.
        is_const: bool,
        /// The property's name.
        name: String,
        /// Its value.
        value: Expr,
        /// Where.
        pos: Pos,
    },
}

/// One key of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableKey {
    /// The expression matched.
    pub expr: Expr,
    /// `exact`, `lpm`, `ternary`, `range`, `optional`, `selector`.
    pub match_kind: String,
    /// Annotations (`@name` renames it for the control plane).
    pub annotations: Vec<Annotation>,
    /// Where it is.
    pub pos: Pos,
}

/// An action named in a table, with any arguments bound there.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRef {
    /// Annotations (`@defaultonly`, `@tableonly`).
    pub annotations: Vec<Annotation>,
    /// The action's name.
    pub name: String,
    /// Arguments, when called.
    pub args: Vec<Arg>,
    /// Where it is.
    pub pos: Pos,
}

/// One entry of a table's `entries`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Annotations (`@priority`).
    pub annotations: Vec<Annotation>,
    /// Written `const` (in a non-const entry list).
    pub is_const: bool,
    /// The key set (a tuple when the table has several keys).
    pub keys: Expr,
    /// The action with its arguments.
    pub action: ActionRef,
    /// `priority = n` if given.
    pub priority: Option<Expr>,
    /// Where it is.
    pub pos: Pos,
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `lhs = rhs;`
    Assign(Expr, Expr, Pos),
    /// `lhs op= rhs;` with the operator (`+`, `|+|`, `<<`, ...).
    CompoundAssign(&'static str, Expr, Expr, Pos),
    /// A call as a statement (method, extern, action, function, `t.apply()`).
    Call(Expr, Pos),
    /// `if (c) a else b`.
    If(Expr, Box<Stmt>, Option<Box<Stmt>>, Pos),
    /// `{ ... }`.
    Block(Vec<Stmt>, Pos),
    /// `switch (e) { label: { ... } ... }`; a case without body falls through to the next.
    Switch(Expr, Vec<SwitchCase>, Pos),
    /// `exit;`
    Exit(Pos),
    /// `return [e];`
    Return(Option<Expr>, Pos),
    /// A local variable, with its initial value.
    Var(Vec<Annotation>, Type, String, Option<Expr>, Pos),
    /// A local constant.
    Const(ConstDecl),
    /// An instance declared in a parser or control (`register<...>(n) r;`, `Sub() s;`).
    Instance(Instance),
    /// `value_set<T>(size) name;` in a parser.
    ValueSet(Type, Expr, String, Vec<Annotation>, Pos),
    /// `for (init; cond; update) body` (C-like).
    For {
        /// Statements run first.
        init: Vec<Stmt>,
        /// The loop goes on while this holds (none: for ever).
        cond: Option<Expr>,
        /// Statements run after each pass.
        update: Vec<Stmt>,
        /// The body.
        body: Box<Stmt>,
        /// Where.
        pos: Pos,
    },
    /// `for (T x in range) body`.
    ForIn {
        /// The loop variable's type, if declared in the loop.
        ty: Option<Type>,
        /// Its name.
        var: String,
        /// The range or list iterated.
        range: Expr,
        /// The body.
        body: Box<Stmt>,
        /// Where.
        pos: Pos,
    },
    /// `break;`
    Break(Pos),
    /// `continue;`
    Continue(Pos),
    /// `;`
    Empty(Pos),
}

/// One case of a switch statement.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchCase {
    /// `default`, or an action name or expression.
    pub label: SwitchLabel,
    /// Its body (None: falls through to the next case).
    pub body: Option<Vec<Stmt>>,
    /// Where.
    pub pos: Pos,
}

/// A label of a switch case.
#[derive(Debug, Clone, PartialEq)]
pub enum SwitchLabel {
    /// `default`.
    Default,
    /// An action name or an expression.
    Expr(Expr),
}

/// An argument of a call or of an instance's constructor.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    /// `name = value`: bound to the parameter `name`.
    pub name: Option<String>,
    /// The value (`_` is [`ExprKind::DontCare`]).
    pub value: Expr,
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it starts.
    pub pos: Pos,
}

/// What an expression is.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// An integer literal.
    Int(IntLit),
    /// `true` or `false`.
    Bool(bool),
    /// A string literal.
    Str(String),
    /// A name (`.name` at top level is written as `name`).
    Name(String),
    /// `this`.
    This,
    /// `e.name`.
    Member(Box<Expr>, String),
    /// `e[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// `e[hi:lo]`.
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `f<T>(args)`.
    Call(Box<Expr>, Vec<Type>, Vec<Arg>),
    /// A unary operator (`!`, `~`, `-`, `+`).
    Unary(&'static str, Box<Expr>),
    /// A binary operator.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(T) e`.
    Cast(Type, Box<Expr>),
    /// `{ a, b }` (a list, tuple, or struct or header by position).
    List(Vec<Expr>),
    /// `{ f = a, g = b }` (a struct or header by field), with `...` at the end if written.
    Record(Vec<(String, Expr)>, bool),
    /// `{#}`: an invalid header or header union.
    Invalid,
    /// `a &&& b` in a key set.
    Mask(Box<Expr>, Box<Expr>),
    /// `a .. b` in a key set.
    Range(Box<Expr>, Box<Expr>),
    /// `default` in a key set.
    Default,
    /// `_`.
    DontCare,
    /// A type in an expression (`T.minSizeInBits()`, a constructor `T(args)`).
    Type(Type),
}

impl Expr {
    /// The expression as P4 writes it, for control-plane names of keys and messages.
    pub fn text(&self) -> String {
        let mut s = String::new();
        write_expr(&mut s, self);
        s
    }
}

fn write_expr(s: &mut String, e: &Expr) {
    use std::fmt::Write;
    match &e.kind {
        ExprKind::Int(i) => {
            if let Some((w, signed)) = i.width {
                let _ = write!(s, "{w}{}", if signed { 's' } else { 'w' });
            }
            let _ = write!(s, "{}", i.value);
        }
        ExprKind::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        ExprKind::Str(t) => {
            let _ = write!(s, "\"{t}\"");
        }
        ExprKind::Name(n) => s.push_str(n),
        ExprKind::This => s.push_str("this"),
        ExprKind::Member(b, f) => {
            write_expr(s, b);
            s.push('.');
            s.push_str(f);
        }
        ExprKind::Index(b, i) => {
            write_expr(s, b);
            s.push('[');
            write_expr(s, i);
            s.push(']');
        }
        ExprKind::Slice(b, h, l) => {
            write_expr(s, b);
            s.push('[');
            write_expr(s, h);
            s.push(':');
            write_expr(s, l);
            s.push(']');
        }
        ExprKind::Call(f, _, args) => {
            write_expr(s, f);
            s.push('(');
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                write_expr(s, &a.value);
            }
            s.push(')');
        }
        ExprKind::Unary(op, a) => {
            s.push_str(op);
            write_expr(s, a);
        }
        ExprKind::Binary(op, a, b) => {
            write_expr(s, a);
            let _ = write!(s, " {op} ");
            write_expr(s, b);
        }
        ExprKind::Cond(c, a, b) => {
            write_expr(s, c);
            s.push_str(" ? ");
            write_expr(s, a);
            s.push_str(" : ");
            write_expr(s, b);
        }
        ExprKind::Cast(_, a) => {
            s.push_str("(cast)");
            write_expr(s, a);
        }
        ExprKind::List(items) => {
            s.push('{');
            for (i, a) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                write_expr(s, a);
            }
            s.push('}');
        }
        ExprKind::Record(items, _) => {
            s.push('{');
            for (i, (n, a)) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{n} = ");
                write_expr(s, a);
            }
            s.push('}');
        }
        ExprKind::Invalid => s.push_str("{#}"),
        ExprKind::Mask(a, b) => {
            write_expr(s, a);
            s.push_str(" &&& ");
            write_expr(s, b);
        }
        ExprKind::Range(a, b) => {
            write_expr(s, a);
            s.push_str(" .. ");
            write_expr(s, b);
        }
        ExprKind::Default => s.push_str("default"),
        ExprKind::DontCare => s.push('_'),
        ExprKind::Type(_) => s.push_str("(type)"),
    }
}
