//! [`Shared`]: a part of the state that copies of the state share until one of them changes
//! it (copy on write).
//!
//! A state-changing command runs on a copy of the whole state that replaces it only when the
//! command succeeds (`sim/mod.rs`), and a save hands a copy to the sink. With every large
//! part behind a `Shared`, such a copy costs a reference count per part; a command then
//! copies only the parts it writes to (`clipboard.set` copies none of them). A `Shared` reads
//! and writes like the value it holds (it dereferences to it), serialises as that value and
//! has its schema, so the scenario format is unchanged.

use std::borrow::Cow;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A value shared by copies of the state until one writes to it: a write through
/// [`DerefMut`] first copies the value when another copy still holds it.
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    /// Holds `value`.
    pub fn new(value: T) -> Self {
        Self(Arc::new(value))
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        T::fmt(self, f)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl<T: Eq> Eq for Shared<T> {}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        T::serialize(self, serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self::new)
    }
}

impl<T: JsonSchema> JsonSchema for Shared<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

impl<T: Clone + IntoIterator> IntoIterator for Shared<T> {
    type Item = T::Item;
    type IntoIter = T::IntoIter;

    /// The value's items (copied first only when another copy still holds it).
    fn into_iter(self) -> Self::IntoIter {
        Arc::unwrap_or_clone(self.0).into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Shared<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        (&*self.0).into_iter()
    }
}

impl<'a, T: Clone> IntoIterator for &'a mut Shared<T>
where
    &'a mut T: IntoIterator,
{
    type Item = <&'a mut T as IntoIterator>::Item;
    type IntoIter = <&'a mut T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        Arc::make_mut(&mut self.0).into_iter()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::Shared;

    /// Counts its copies.
    #[derive(Debug, PartialEq)]
    struct Counted(Rc<Cell<usize>>, Vec<i32>);

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.0.set(self.0.get() + 1);
            Self(Rc::clone(&self.0), self.1.clone())
        }
    }

    #[test]
    fn a_write_copies_only_a_value_another_copy_holds() {
        let copies = Rc::new(Cell::new(0));
        let mut a = Shared::new(Counted(Rc::clone(&copies), vec![1, 2]));
        let b = a.clone();
        assert_eq!(copies.get(), 0, "a copy of a Shared shares the value");
        a.1.push(3);
        assert_eq!(copies.get(), 1, "the first write copies the shared value");
        assert_eq!(b.1, vec![1, 2], "the other copy is untouched");
        a.1.push(4);
        assert_eq!(
            copies.get(),
            1,
            "a value held by one copy is written in place"
        );
        assert_eq!(a.1, vec![1, 2, 3, 4]);
        drop(b);
        for x in &mut Shared::new(vec![1, 2]) {
            *x += 1;
        }
    }

    #[test]
    fn serialises_as_the_value_it_holds() {
        let a = Shared::new(vec!["x".to_string()]);
        let json = serde_json::to_string(&a).unwrap_or_default();
        assert_eq!(json, r#"["x"]"#);
        let back: Shared<Vec<String>> = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(back, a);
        let listed: Vec<&String> = (&back).into_iter().collect();
        assert_eq!(listed, ["x"]);
    }
}
