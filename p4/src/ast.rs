//! The program as written: declarations, statements and expressions with their positions.

use crate::lexer::IntLit;
use crate::source::Pos;

/// A whole program after preprocessing.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Top-level declarations in order.
    pub decls: Vec<Decl>,
}

/// `@name(...)` and friends; only `@name` changes what the program means here.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// The annotation's name.
    pub name: String,
    /// Its arguments (expressions), if it has parentheses.
    pub args: Vec<Expr>,
    /// Where it is.
    pub pos: Pos,
}

/// A type as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// `bit<W>`.
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
    /// `_` (don't care).
    DontCare,
    /// A named type, with type arguments if any.
    Named(String, Vec<Type>),
    /// A header stack `T[n]`.
    Stack(Box<Type>, Box<Expr>),
    /// A tuple type `tuple<...>`.
    Tuple(Vec<Type>),
}

/// A field of a header or struct.
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

/// A parameter of a parser, control, action, extern or package.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Annotations.
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

/// A method or function signature (externs, parser/control/package types).
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Return type (None for constructors, parsers, controls and packages).
    pub ret: Option<Type>,
    /// Name.
    pub name: String,
    /// Type parameters.
    pub type_params: Vec<String>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A top-level declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Decl {
    /// `const T name = value;`
    Const(ConstDecl),
    /// `typedef T name;` or `type T name;`
    Typedef {
        /// The aliased type.
        ty: Type,
        /// The new name.
        name: String,
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
    ExternObject {
        /// Annotations.
        annotations: Vec<Annotation>,
        /// Name.
        name: String,
        /// Type parameters.
        type_params: Vec<String>,
        /// Constructors and methods.
        methods: Vec<Signature>,
        /// Where it is declared.
        pos: Pos,
    },
    /// `extern R f<T>(...);`
    ExternFunction(Signature),
    /// A parser or control type without body, or a package type.
    TypeDecl {
        /// `parser`, `control` or `package`.
        kind: &'static str,
        /// The signature.
        sig: Signature,
    },
    /// A parser with its states.
    Parser(ParserDecl),
    /// A control with its body.
    Control(ControlDecl),
    /// An action outside any control.
    Action(ActionDecl),
    /// `Type(args) name;` at top level (`main`).
    Instance(Instance),
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
    /// Fields in order.
    pub fields: Vec<Field>,
    /// Where it is declared.
    pub pos: Pos,
}

/// An enum, serializable when it has an underlying type.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumDecl {
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
    pub args: Vec<Expr>,
    /// Name.
    pub name: String,
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
    /// Parameters.
    pub params: Vec<Param>,
    /// Local declarations (variables, constants, instances).
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
    /// Where it goes next.
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
        /// Cases in order.
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
    /// Parameters.
    pub params: Vec<Param>,
    /// Actions, tables, variables, constants and instances.
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

/// A table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: String,
    /// Keys: expression, match kind, annotations.
    pub keys: Vec<TableKey>,
    /// Actions it may run: name, arguments bound in the program, annotations.
    pub actions: Vec<ActionRef>,
    /// `default_action`, and whether it is `const`.
    pub default_action: Option<(ActionRef, bool)>,
    /// `const entries`.
    pub entries: Vec<Entry>,
    /// `size`.
    pub size: Option<Expr>,
    /// Other properties (`implementation`, `counters`, ...), by name.
    pub other: Vec<(String, Expr, Pos)>,
    /// Where it is declared.
    pub pos: Pos,
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
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// The action's name.
    pub name: String,
    /// Arguments, when called.
    pub args: Vec<Expr>,
    /// Where it is.
    pub pos: Pos,
}

/// One `const entries` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The keyset (a tuple when the table has several keys).
    pub keys: Vec<Expr>,
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
    /// A call as a statement (method, extern, action, `t.apply()`).
    Call(Expr, Pos),
    /// `if (c) a else b`.
    If(Expr, Box<Stmt>, Option<Box<Stmt>>, Pos),
    /// `{ ... }`.
    Block(Vec<Stmt>, Pos),
    /// `switch (e) { label: { ... } ... }`; a case without body falls through to the next.
    Switch(Expr, Vec<(SwitchLabel, Option<Vec<Stmt>>)>, Pos),
    /// `exit;`
    Exit(Pos),
    /// `return [e];`
    Return(Option<Expr>, Pos),
    /// A local variable, with its initial value.
    Var(Type, String, Option<Expr>, Pos),
    /// A local constant.
    Const(ConstDecl),
    /// An instance declared in a block (`register<...>(n) r;`).
    Instance(Instance),
    /// `;`
    Empty(Pos),
}

/// A label of a switch case.
#[derive(Debug, Clone, PartialEq)]
pub enum SwitchLabel {
    /// `default`.
    Default(Pos),
    /// An action name or an expression.
    Expr(Expr),
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
    /// A name.
    Name(String),
    /// `e.name`.
    Member(Box<Expr>, String),
    /// `e[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// `e[hi:lo]`.
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `f<T>(args)`.
    Call(Box<Expr>, Vec<Type>, Vec<Expr>),
    /// A unary operator (`!`, `~`, `-`, `+`).
    Unary(&'static str, Box<Expr>),
    /// A binary operator.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(T) e`.
    Cast(Type, Box<Expr>),
    /// `{ a, b }`.
    List(Vec<Expr>),
    /// `a &&& b` in a keyset.
    Mask(Box<Expr>, Box<Expr>),
    /// `a .. b` in a keyset.
    Range(Box<Expr>, Box<Expr>),
    /// `default` in a keyset.
    Default,
    /// `_` in a keyset.
    DontCare,
    /// A type used as a value's prefix (`bit<8>` in `(bit<8>)` is a cast; this is `T.minSizeInBits()`).
    Type(Type),
}
