//! DECK messages: a buffer with a cursor, typed pack/unpack.
//!
//! Every packed item is a one-byte type tag followed by its little-endian value, so `unpack`
//! checks that it reads what was packed. Byte strings and nested messages carry a u32 length.

use super::{DeckError, MboxId};

const T_U8: u8 = 1;
const T_I8: u8 = 2;
const T_U16: u8 = 3;
const T_I16: u8 = 4;
const T_U32: u8 = 5;
const T_I32: u8 = 6;
const T_U64: u8 = 7;
const T_I64: u8 = 8;
const T_F32: u8 = 9;
const T_F64: u8 = 10;
const T_BYTES: u8 = 11;
const T_MBOX: u8 = 12;
const T_MSG: u8 = 13;

/// A DECK message: a buffer of fixed capacity (DECK's or the user's), filled by `pack` and read
/// back by `unpack` from a cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    buf: Vec<u8>,
    cap: usize,
    cursor: usize,
}

/// A value that can be packed into and unpacked from a [`Message`].
pub trait Pack: Sized {
    #[doc(hidden)]
    fn pack_into(&self, m: &mut Message) -> Result<(), DeckError>;
    #[doc(hidden)]
    fn unpack_from(m: &mut Message) -> Result<Self, DeckError>;
}

macro_rules! scalar {
    ($t:ty, $tag:expr) => {
        impl Pack for $t {
            fn pack_into(&self, m: &mut Message) -> Result<(), DeckError> {
                m.put($tag, &self.to_le_bytes())
            }
            fn unpack_from(m: &mut Message) -> Result<Self, DeckError> {
                let b = m.take($tag, std::mem::size_of::<$t>())?;
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                Ok(<$t>::from_le_bytes(a))
            }
        }
    };
}
scalar!(u8, T_U8);
scalar!(i8, T_I8);
scalar!(u16, T_U16);
scalar!(i16, T_I16);
scalar!(u32, T_U32);
scalar!(i32, T_I32);
scalar!(u64, T_U64);
scalar!(i64, T_I64);
scalar!(f32, T_F32);
scalar!(f64, T_F64);

impl Pack for Vec<u8> {
    fn pack_into(&self, m: &mut Message) -> Result<(), DeckError> {
        m.pack_bytes(self)
    }
    fn unpack_from(m: &mut Message) -> Result<Self, DeckError> {
        m.unpack_bytes()
    }
}

impl Pack for MboxId {
    fn pack_into(&self, m: &mut Message) -> Result<(), DeckError> {
        let mut b = [0u8; 6];
        b[..2].copy_from_slice(&self.node.to_le_bytes());
        b[2..].copy_from_slice(&self.id.to_le_bytes());
        m.put(T_MBOX, &b)
    }
    fn unpack_from(m: &mut Message) -> Result<Self, DeckError> {
        let b = m.take(T_MBOX, 6)?;
        Ok(MboxId {
            node: u16::from_le_bytes([b[0], b[1]]),
            id: u32::from_le_bytes([b[2], b[3], b[4], b[5]]),
        })
    }
}

impl Pack for Message {
    fn pack_into(&self, m: &mut Message) -> Result<(), DeckError> {
        m.put_len(T_MSG, self.as_bytes())
    }
    fn unpack_from(m: &mut Message) -> Result<Self, DeckError> {
        let b = m.take_len(T_MSG)?.to_vec();
        Ok(Message::from_bytes(b))
    }
}

impl Message {
    /// A message with a DECK-allocated buffer of `capacity` bytes.
    pub fn new(capacity: usize) -> Message {
        Message {
            buf: Vec::with_capacity(capacity.min(1 << 20)),
            cap: capacity,
            cursor: 0,
        }
    }

    /// A message using the caller's buffer: its capacity is the buffer's length, its contents
    /// are discarded (the message starts empty).
    pub fn with_buffer(mut buf: Vec<u8>) -> Message {
        let cap = buf.len().max(buf.capacity());
        buf.clear();
        Message {
            buf,
            cap,
            cursor: 0,
        }
    }

    /// A received message: full, cursor at the start.
    pub fn from_bytes(buf: Vec<u8>) -> Message {
        let cap = buf.len();
        Message {
            buf,
            cap,
            cursor: 0,
        }
    }

    /// Packs one value; packing past the capacity is [`DeckError::Overflow`].
    pub fn pack<T: Pack>(&mut self, v: &T) -> Result<(), DeckError> {
        v.pack_into(self)
    }

    /// Unpacks the next value; a different type or the end of the data is an error.
    pub fn unpack<T: Pack>(&mut self) -> Result<T, DeckError> {
        T::unpack_from(self)
    }

    pub fn pack_bytes(&mut self, b: &[u8]) -> Result<(), DeckError> {
        self.put_len(T_BYTES, b)
    }

    pub fn unpack_bytes(&mut self) -> Result<Vec<u8>, DeckError> {
        Ok(self.take_len(T_BYTES)?.to_vec())
    }

    /// Empties the message (capacity unchanged).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.cursor = 0;
    }

    /// Moves the unpack cursor back to the start.
    pub fn reset(&mut self) {
        self.cursor = 0;
    }

    /// The packed bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes not unpacked yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.cursor
    }

    /// Gives the buffer back.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn room(&self, n: usize) -> Result<(), DeckError> {
        if self.buf.len() + n > self.cap {
            return Err(DeckError::Overflow {
                need: n,
                free: self.cap - self.buf.len(),
            });
        }
        Ok(())
    }

    fn put(&mut self, tag: u8, b: &[u8]) -> Result<(), DeckError> {
        self.room(1 + b.len())?;
        self.buf.push(tag);
        self.buf.extend_from_slice(b);
        Ok(())
    }

    fn put_len(&mut self, tag: u8, b: &[u8]) -> Result<(), DeckError> {
        let n = u32::try_from(b.len()).map_err(|_| DeckError::Overflow {
            need: b.len(),
            free: 0,
        })?;
        self.room(5 + b.len())?;
        self.buf.push(tag);
        self.buf.extend_from_slice(&n.to_le_bytes());
        self.buf.extend_from_slice(b);
        Ok(())
    }

    fn take(&mut self, tag: u8, n: usize) -> Result<&[u8], DeckError> {
        let rest = &self.buf[self.cursor..];
        match rest.first() {
            None => return Err(DeckError::EndOfMessage),
            Some(t) if *t != tag => {
                return Err(DeckError::TypeMismatch {
                    expected: tag,
                    found: *t,
                })
            }
            _ => {}
        }
        if rest.len() < 1 + n {
            return Err(DeckError::EndOfMessage);
        }
        let s = self.cursor + 1;
        self.cursor = s + n;
        Ok(&self.buf[s..s + n])
    }

    fn take_len(&mut self, tag: u8) -> Result<&[u8], DeckError> {
        let save = self.cursor;
        let n = {
            let b = self.take(tag, 4)?;
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
        };
        if self.remaining() < n {
            self.cursor = save;
            return Err(DeckError::EndOfMessage);
        }
        let s = self.cursor;
        self.cursor += n;
        Ok(&self.buf[s..s + n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_every_type() {
        let mut m = Message::new(256);
        m.pack(&7u8).unwrap();
        m.pack(&-7i8).unwrap();
        m.pack(&700u16).unwrap();
        m.pack(&-700i16).unwrap();
        m.pack(&70_000u32).unwrap();
        m.pack(&-70_000i32).unwrap();
        m.pack(&(1u64 << 40)).unwrap();
        m.pack(&-(1i64 << 40)).unwrap();
        m.pack(&1.5f32).unwrap();
        m.pack(&2.25f64).unwrap();
        m.pack_bytes(b"hello").unwrap();
        m.pack(&MboxId { node: 3, id: 99 }).unwrap();
        let mut inner = Message::new(32);
        inner.pack(&42u32).unwrap();
        m.pack(&inner).unwrap();
        assert_eq!(m.unpack::<u8>().unwrap(), 7);
        assert_eq!(m.unpack::<i8>().unwrap(), -7);
        assert_eq!(m.unpack::<u16>().unwrap(), 700);
        assert_eq!(m.unpack::<i16>().unwrap(), -700);
        assert_eq!(m.unpack::<u32>().unwrap(), 70_000);
        assert_eq!(m.unpack::<i32>().unwrap(), -70_000);
        assert_eq!(m.unpack::<u64>().unwrap(), 1 << 40);
        assert_eq!(m.unpack::<i64>().unwrap(), -(1 << 40));
        assert_eq!(m.unpack::<f32>().unwrap(), 1.5);
        assert_eq!(m.unpack::<f64>().unwrap(), 2.25);
        assert_eq!(m.unpack_bytes().unwrap(), b"hello");
        assert_eq!(m.unpack::<MboxId>().unwrap(), MboxId { node: 3, id: 99 });
        let mut got = m.unpack::<Message>().unwrap();
        assert_eq!(got.unpack::<u32>().unwrap(), 42);
        assert_eq!(m.unpack::<u8>(), Err(DeckError::EndOfMessage));
        m.reset();
        assert_eq!(
            m.unpack::<u32>(),
            Err(DeckError::TypeMismatch {
                expected: T_U32,
                found: T_U8
            })
        );
        assert_eq!(m.unpack::<u8>().unwrap(), 7);
        m.clear();
        assert!(m.is_empty());
        assert_eq!(m.unpack::<u8>(), Err(DeckError::EndOfMessage));
    }

    #[test]
    fn packing_past_the_end_is_an_error() {
        let mut m = Message::with_buffer(vec![0u8; 10]);
        assert_eq!(m.capacity(), 10);
        m.pack(&1u64).unwrap();
        assert!(matches!(m.pack(&1u8), Err(DeckError::Overflow { .. })));
        assert_eq!(m.len(), 9);
        assert!(matches!(
            m.pack_bytes(&[0; 100]),
            Err(DeckError::Overflow { .. })
        ));
        assert_eq!(m.unpack::<u64>().unwrap(), 1);
    }

    #[test]
    fn truncated_input_is_an_error() {
        let mut m = Message::from_bytes(vec![T_BYTES, 200, 0, 0, 0, 1, 2]);
        assert_eq!(m.unpack_bytes(), Err(DeckError::EndOfMessage));
        let mut m = Message::from_bytes(vec![T_U64, 1, 2]);
        assert_eq!(m.unpack::<u64>(), Err(DeckError::EndOfMessage));
    }
}
