//! Objects by handle: the small numbers a NIC gives a program for its PDs, CQs and SRQs.

/// Objects of one kind, each at the handle it was given; freed handles are reused.
#[derive(Debug)]
pub struct Table<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Table<T> {
    /// Stores `v` and returns its handle.
    pub fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(h) => {
                self.slots[h as usize] = Some(v);
                h
            }
            None => {
                self.slots.push(Some(v));
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The object of handle `h`.
    pub fn get(&self, h: u32) -> Option<&T> {
        self.slots.get(h as usize)?.as_ref()
    }

    /// The object of handle `h`, to change.
    pub fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        self.slots.get_mut(h as usize)?.as_mut()
    }

    /// Takes the object of handle `h` out; its handle is free again.
    pub fn remove(&mut self, h: u32) -> Option<T> {
        let v = self.slots.get_mut(h as usize)?.take()?;
        self.free.push(h);
        Some(v)
    }

    /// Every object with its handle.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(h, v)| v.as_ref().map(|v| (h as u32, v)))
    }

    /// The handles of the objects for which `f` holds.
    pub fn handles_where(&self, f: impl Fn(&T) -> bool) -> Vec<u32> {
        self.iter().filter(|(_, v)| f(v)).map(|(h, _)| h).collect()
    }

    /// Objects stored.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_reused_after_removal() {
        let mut t = Table::default();
        let a = t.insert("a");
        let b = t.insert("b");
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.get(a), None);
        assert_eq!(t.insert("c"), a);
        assert_eq!((t.len(), t.get(b)), (2, Some(&"b")));
        assert_eq!(t.remove(99), None);
    }
}
