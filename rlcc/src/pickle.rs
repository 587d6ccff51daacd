//! A reader for the part of Python's pickle format that `torch.save` writes (protocols 2 to 5):
//! containers, strings, numbers, globals, REDUCE, NEWOBJ and BUILD, and persistent IDs. It
//! builds a [`Value`] tree and runs no code: a global is its name, a call its callee and
//! arguments, an object its class and state. Anything else is refused with its offset.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A decoded pickle value.
#[derive(Debug, Clone)]
pub enum Value {
    /// `None`.
    None,
    /// A bool.
    Bool(bool),
    /// An integer (pickled longs beyond 64 bits are refused).
    Int(i64),
    /// A float.
    Float(f64),
    /// A str.
    Str(Rc<str>),
    /// bytes.
    Bytes(Rc<[u8]>),
    /// A tuple.
    Tuple(Rc<[Value]>),
    /// A list (or a set or frozenset, as a list).
    List(Rc<RefCell<Vec<Value>>>),
    /// A dict or an `OrderedDict`, its items in insertion order.
    Dict(Rc<RefCell<Vec<(Value, Value)>>>),
    /// A global by its "module name".
    Global(Rc<str>),
    /// A call to a global that is not a container (`func(*args)`), or an object made by
    /// NEWOBJ, with the state BUILD gave it.
    Object(Rc<RefCell<Object>>),
    /// A persistent ID (how `torch.save` refers to a tensor's storage).
    Persistent(Rc<Value>),
}

/// A call or a new object.
#[derive(Debug, Clone)]
pub struct Object {
    /// The callee or class: "module name".
    pub class: Rc<str>,
    /// Its arguments.
    pub args: Vec<Value>,
    /// The state BUILD set, if any.
    pub state: Option<Value>,
}

impl Value {
    /// The text of a str.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An int.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The items of a tuple or a list.
    pub fn items(&self) -> Option<Vec<Value>> {
        match self {
            Value::Tuple(t) => Some(t.to_vec()),
            Value::List(l) => Some(l.borrow().clone()),
            _ => None,
        }
    }
}

/// Most memo entries, stack depth and container items a pickle may make (a torch checkpoint of
/// an MLP makes a few hundred): a corrupt or hostile file cannot exhaust memory.
const LIMIT: usize = 1 << 20;

/// Reads one pickle from the start of `data`; returns the value and the bytes it took.
pub fn read(data: &[u8]) -> Result<(Value, usize), String> {
    Reader {
        data,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    }
    .run()
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(format!("cut short at byte {} (needs {n} more)", self.at));
        };
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn le(&mut self, n: usize) -> Result<u64, String> {
        let b = self.take(n)?;
        Ok(b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x)))
    }

    fn line(&mut self) -> Result<String, String> {
        let rest = &self.data[self.at..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| format!("unterminated line at byte {}", self.at))?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.at += n + 1;
        Ok(s)
    }

    fn sized(&mut self, n: u64) -> Result<&[u8], String> {
        let n = usize::try_from(n).map_err(|_| "a length beyond memory".to_owned())?;
        self.take(n)
    }

    fn text(&mut self, n: u64) -> Result<Value, String> {
        let at = self.at;
        let b = self.sized(n)?;
        let s = std::str::from_utf8(b).map_err(|_| format!("a str that is not UTF-8 at byte {at}"))?;
        Ok(Value::Str(s.into()))
    }

    fn push(&mut self, v: Value) -> Result<(), String> {
        if self.stack.len() >= LIMIT {
            return Err("more than 2^20 values on the stack".into());
        }
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, String> {
        self.stack
            .pop()
            .ok_or_else(|| format!("stack empty at byte {}", self.at))
    }

    fn top(&self) -> Result<&Value, String> {
        self.stack
            .last()
            .ok_or_else(|| format!("stack empty at byte {}", self.at))
    }

    /// The values pushed since the last MARK.
    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| format!("no MARK before byte {}", self.at))?;
        if m > self.stack.len() {
            return Err(format!("MARK above the stack at byte {}", self.at));
        }
        Ok(self.stack.split_off(m))
    }

    fn memoize(&mut self, key: u32) -> Result<(), String> {
        if self.memo.len() >= LIMIT {
            return Err("more than 2^20 memo entries".into());
        }
        let v = self.top()?.clone();
        self.memo.insert(key, v);
        Ok(())
    }

    fn get(&mut self, key: u32) -> Result<(), String> {
        let v = self
            .memo
            .get(&key)
            .cloned()
            .ok_or_else(|| format!("memo {key} unset at byte {}", self.at))?;
        self.push(v)
    }

    fn set_items(&mut self, target: &Value, items: Vec<Value>) -> Result<(), String> {
        let Value::Dict(d) = target else {
            return Err(format!("SETITEM(S) on a non-dict at byte {}", self.at));
        };
        let mut d = d.borrow_mut();
        for pair in items.chunks(2) {
            let [k, v] = pair else {
                return Err(format!("odd SETITEMS at byte {}", self.at));
            };
            if d.len() >= LIMIT {
                return Err("a dict of more than 2^20 items".into());
            }
            d.push((k.clone(), v.clone()));
        }
        Ok(())
    }

    fn append(&mut self, target: &Value, items: Vec<Value>) -> Result<(), String> {
        let Value::List(l) = target else {
            return Err(format!("APPEND(S) on a non-list at byte {}", self.at));
        };
        let mut l = l.borrow_mut();
        if l.len() + items.len() > LIMIT {
            return Err("a list of more than 2^20 items".into());
        }
        l.extend(items);
        Ok(())
    }

    /// `func(*args)`: containers the checkpoint uses become containers, the rest calls.
    fn call(func: Value, args: Vec<Value>) -> Value {
        let name = match &func {
            Value::Global(g) => g.clone(),
            _ => "?".into(),
        };
        match &*name {
            "collections OrderedDict" | "builtins dict" | "__builtin__ dict" if args.is_empty() => {
                Value::Dict(Rc::default())
            }
            "builtins set" | "__builtin__ set" | "builtins frozenset" | "__builtin__ frozenset" => {
                let items = args.first().and_then(Value::items).unwrap_or_default();
                Value::List(Rc::new(RefCell::new(items)))
            }
            _ => Value::Object(Rc::new(RefCell::new(Object {
                class: name,
                args,
                state: None,
            }))),
        }
    }

    fn run(mut self) -> Result<(Value, usize), String> {
        loop {
            let at = self.at;
            let op = self.u8()?;
            match op {
                0x80 => {
                    let proto = self.u8()?;
                    if !(2..=5).contains(&proto) {
                        return Err(format!("pickle protocol {proto} at byte {at}: expected 2 to 5"));
                    }
                }
                0x95 => {
                    self.take(8)?; // FRAME: a length hint
                }
                b'.' => {
                    let v = self.pop()?;
                    return Ok((v, self.at));
                }
                _ => {
                    if !(self.literal(op, at)? || self.container(op, at)? || self.object(op, at)?) {
                        return Err(format!(
                            "pickle opcode 0x{op:02x} at byte {at} is not one torch.save writes"
                        ));
                    }
                }
            }
        }
    }

    /// Pushes a literal (None, bool, int, float, str, bytes) for `op`; false for an opcode of another group.
    fn literal(&mut self, op: u8, at: usize) -> Result<bool, String> {
        match op {
            b'N' => self.push(Value::None)?,
            0x88 => self.push(Value::Bool(true))?,
            0x89 => self.push(Value::Bool(false))?,
            b'J' => {
                let v = self.le(4)? as u32 as i32;
                self.push(Value::Int(i64::from(v)))?
            }
            b'K' => {
                let v = self.u8()?;
                self.push(Value::Int(i64::from(v)))?
            }
            b'M' => {
                let v = self.le(2)?;
                self.push(Value::Int(v as i64))?
            }
            0x8a => {
                let n = usize::from(self.u8()?);
                let b = self.take(n)?;
                if n > 8 {
                    return Err(format!("an integer of {n} bytes at byte {at}"));
                }
                let mut v: i64 = if b.last().is_some_and(|&x| x & 0x80 != 0) {
                    -1
                } else {
                    0
                };
                for &x in b.iter().rev() {
                    v = v << 8 | i64::from(x);
                }
                self.push(Value::Int(v))?
            }
            b'G' => {
                let v = f64::from_be_bytes(self.take(8)?.try_into().map_err(|_| "float")?);
                self.push(Value::Float(v))?
            }
            b'X' => {
                let n = self.le(4)?;
                let v = self.text(n)?;
                self.push(v)?
            }
            0x8c => {
                let n = u64::from(self.u8()?);
                let v = self.text(n)?;
                self.push(v)?
            }
            0x8d => {
                let n = self.le(8)?;
                let v = self.text(n)?;
                self.push(v)?
            }
            b'U' | b'C' => {
                let n = u64::from(self.u8()?);
                let v = Value::Bytes(self.sized(n)?.into());
                self.push(v)?
            }
            b'T' | b'B' => {
                let n = self.le(4)?;
                let v = Value::Bytes(self.sized(n)?.into());
                self.push(v)?
            }
            0x8e => {
                let n = self.le(8)?;
                let v = Value::Bytes(self.sized(n)?.into());
                self.push(v)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Builds tuples, lists and dicts, and marks, pops and duplicates on the stack, for `op`; false for an opcode of another group.
    fn container(&mut self, op: u8, at: usize) -> Result<bool, String> {
        match op {
            b'(' => self.marks.push(self.stack.len()),
            b')' => self.push(Value::Tuple(Rc::new([])))?,
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items.into()))?
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if self.stack.len() < n {
                    return Err(format!("TUPLE{n} on a short stack at byte {at}"));
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push(Value::Tuple(items.into()))?
            }
            b']' => self.push(Value::List(Rc::default()))?,
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Value::List(Rc::new(RefCell::new(items))))?
            }
            b'}' => self.push(Value::Dict(Rc::default()))?,
            b'd' => {
                let items = self.pop_mark()?;
                let d = Value::Dict(Rc::default());
                self.set_items(&d, items)?;
                self.push(d)?
            }
            0x8f => self.push(Value::List(Rc::default()))?,
            0x90 => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.append(&target, items)?
            }
            0x91 => {
                let items = self.pop_mark()?;
                self.push(Value::List(Rc::new(RefCell::new(items))))?
            }
            b'a' => {
                let v = self.pop()?;
                let target = self.top()?.clone();
                self.append(&target, vec![v])?
            }
            b'e' => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.append(&target, items)?
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                let target = self.top()?.clone();
                self.set_items(&target, vec![k, v])?
            }
            b'u' => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.set_items(&target, items)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Memo, globals, calls, BUILD and persistent IDs for `op`; false for an opcode of another group.
    fn object(&mut self, op: u8, at: usize) -> Result<bool, String> {
        match op {
            b'q' => {
                let k = u32::from(self.u8()?);
                self.memoize(k)?
            }
            b'r' => {
                let k = self.le(4)? as u32;
                self.memoize(k)?
            }
            0x94 => {
                let k = self.memo.len() as u32;
                self.memoize(k)?
            }
            b'h' => {
                let k = u32::from(self.u8()?);
                self.get(k)?
            }
            b'j' => {
                let k = self.le(4)? as u32;
                self.get(k)?
            }
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                self.push(Value::Global(format!("{module} {name}").into()))?
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Some(m), Some(n)) = (module.as_str(), name.as_str()) else {
                    return Err(format!("STACK_GLOBAL without two strs at byte {at}"));
                };
                self.push(Value::Global(format!("{m} {n}").into()))?
            }
            // REDUCE (a call) and NEWOBJ (a class made): both a callable and its argument tuple.
            b'R' | 0x81 => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let name = if op == b'R' { "REDUCE" } else { "NEWOBJ" };
                let args = args
                    .items()
                    .ok_or_else(|| format!("{name} without a tuple at byte {at}"))?;
                self.push(Self::call(callable, args))?
            }
            0x92 => {
                let _kwargs = self.pop()?;
                let args = self.pop()?;
                let class = self.pop()?;
                let args = args.items().unwrap_or_default();
                self.push(Self::call(class, args))?
            }
            b'b' => {
                let state = self.pop()?;
                match self.top()? {
                    Value::Object(o) => o.borrow_mut().state = Some(state),
                    // BUILD on a dict (an OrderedDict's own attributes): nothing to keep.
                    Value::Dict(_) => {}
                    _ => return Err(format!("BUILD on a value that is no object at byte {at}")),
                }
            }
            b'Q' => {
                let pid = self.pop()?;
                self.push(Value::Persistent(Rc::new(pid)))?
            }
            b'0' => {
                self.pop()?;
            }
            b'2' => {
                let v = self.top()?.clone();
                self.push(v)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_globals_calls_and_persistent_ids() {
        // pickle.dumps(OrderedDict(a=(1, 'x', None)), protocol=2) by hand, plus a persistent ID:
        // PROTO 2, GLOBAL collections OrderedDict, EMPTY_TUPLE, REDUCE, MARK,
        // BINUNICODE 'a', BININT1 1, SHORT_BINUNICODE 'x' (proto 4 op), NONE, TUPLE3,
        // SETITEMS, STOP.
        let mut p = vec![0x80, 2, b'c'];
        p.extend_from_slice(b"collections\nOrderedDict\n");
        p.extend_from_slice(&[
            b')', b'R', b'(', b'X', 1, 0, 0, 0, b'a', b'K', 1, 0x8c, 1, b'x', b'N', 0x87, b'u',
        ]);
        p.push(b'.');
        let (v, n) = read(&p).unwrap();
        assert_eq!(n, p.len());
        let Value::Dict(d) = v else { panic!("{v:?}") };
        let d = d.borrow();
        assert_eq!(d[0].0.as_str(), Some("a"));
        let t = d[0].1.items().unwrap();
        assert_eq!((t[0].as_int(), t[1].as_str()), (Some(1), Some("x")));
        assert!(matches!(t[2], Value::None));
        // A persistent ID and a call of another global.
        let mut q = vec![0x80, 2, b'c'];
        q.extend_from_slice(b"torch._utils\n_rebuild_tensor_v2\n");
        q.extend_from_slice(&[b'(', b'X', 1, 0, 0, 0, b'0', b'Q', b'K', 0, b't', b'R', b'.']);
        let (v, _) = read(&q).unwrap();
        let Value::Object(o) = v else { panic!("{v:?}") };
        assert_eq!(&*o.borrow().class, "torch._utils _rebuild_tensor_v2");
        assert!(matches!(o.borrow().args[0], Value::Persistent(_)));
    }

    #[test]
    fn damaged_pickles_are_refused_with_where() {
        assert!(read(&[0x80, 9]).unwrap_err().contains("protocol 9"));
        assert!(
            read(&[0x80, 2, b'X', 200, 0, 0, 0, b'a'])
                .unwrap_err()
                .contains("cut short")
        );
        assert!(read(&[0x80, 2, b'h', 3]).unwrap_err().contains("memo 3 unset"));
        assert!(read(&[0x80, 2, b'i']).unwrap_err().contains("opcode 0x69 at byte 2"));
        assert!(read(&[0x80, 2, b'.']).unwrap_err().contains("stack empty"));
    }
}
