//! Registered event types of plugins (plugin ABI 1.2, `Record::EventTypeDef`), resolved once:
//! the Event Type interned, the fixed attributes parsed, the owner chain built, the value names
//! split. A `Record::Compact` then finds its type by id ([`TypeTable::get`]) with no text to
//! read. The table sits in the typing context, per process image (each image numbers its types
//! itself).

use memscope_core::attr_text::parse_attr;
use memscope_core::event::{Device, EventType};
use memscope_core::owner::OwnerChain;
use memscope_wire::Record;

/// `MEMSCOPE_TYPE_ACCOUNT`.
pub const TYPE_ACCOUNT: u32 = 1;

/// One registered type, resolved.
#[derive(Clone, Debug)]
pub struct TypeInfo {
    /// Its Event Type.
    pub event_type: EventType,
    /// Its device code (`u32::MAX`: none, `u32::MAX - 1`: cpu, else a logical device id).
    pub device: u32,
    /// Account-only volume (`MEMSCOPE_TYPE_ACCOUNT`).
    pub account: bool,
    /// Name of its rows.
    pub name: Option<String>,
    /// Fixed Attr pairs, without `owner`.
    pub pairs: Vec<(String, String)>,
    /// Owner chain of its MALLOC rows (`<event_type>@<owner>…`).
    pub owner: OwnerChain,
    /// Names of the per-event values.
    pub values: Vec<String>,
}

impl TypeInfo {
    /// Resolves a definition's texts.
    pub fn new(
        flags: u32,
        device: u32,
        event_type: &[u8],
        name: &[u8],
        attrs: &[u8],
        values: &[u8],
    ) -> TypeInfo {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let ty = EventType::custom(&text(event_type));
        let mut pairs = parse_attr(&text(attrs));
        let chain = take_owner(ty, &mut pairs);
        let name = text(name);
        let values = text(values);
        TypeInfo {
            event_type: ty,
            device,
            account: flags & TYPE_ACCOUNT != 0,
            name: (!name.is_empty()).then_some(name),
            pairs,
            owner: chain,
            values: values
                .split(',')
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The row's device (`map`: logical → physical device id).
    pub fn device(&self, map: impl Fn(u32) -> u32) -> Device {
        match self.device {
            u32::MAX => Device::NotApplicable,
            d if d == u32::MAX - 1 => Device::Cpu,
            d => Device::Npu(map(d)),
        }
    }

    /// The Attr pairs of one event: the fixed pairs, then `name:value` for each value.
    pub fn pairs_with(&self, values: &[u8]) -> Vec<(String, String)> {
        let mut p = self.pairs.clone();
        for (n, v) in self.values.iter().zip(memscope_wire::decode_values(values)) {
            p.push((n.clone(), v.to_string()));
        }
        p
    }
}

/// Takes the `owner` pair out of a plugin event's Attr `pairs` and builds the owner chain of its
/// MALLOC rows: `<event_type>@<owner>…` (the owner's own `@` levels kept).
pub fn take_owner(ty: EventType, pairs: &mut Vec<(String, String)>) -> OwnerChain {
    let owner = pairs
        .iter()
        .position(|(k, _)| k == "owner")
        .map(|i| pairs.remove(i).1);
    let mut chain = OwnerChain::framework(ty.as_str());
    for l in owner.iter().flat_map(|o| o.split('@')) {
        chain.push(l);
    }
    chain
}

/// The registered types of one process, by (image, id).
#[derive(Debug, Default)]
pub struct TypeTable {
    images: Vec<Vec<Option<TypeInfo>>>,
}

impl TypeTable {
    /// Takes a `Record::EventTypeDef` of image `image` (other records are ignored). A type
    /// defined again (by another thread) keeps its first resolution.
    pub fn define<B: AsRef<[u8]>>(&mut self, image: usize, rec: &Record<B>) {
        let Record::EventTypeDef {
            id,
            device,
            flags,
            event_type,
            name,
            attrs,
            values,
        } = rec
        else {
            return;
        };
        if self.get(image, *id).is_some() {
            return;
        }
        if self.images.len() <= image {
            self.images.resize_with(image + 1, Vec::new);
        }
        let types = &mut self.images[image];
        let i = *id as usize;
        if types.len() <= i {
            types.resize(i + 1, None);
        }
        types[i] = Some(TypeInfo::new(
            *flags,
            *device,
            event_type.as_ref(),
            name.as_ref(),
            attrs.as_ref(),
            values.as_ref(),
        ));
    }

    /// Type `id` of image `image`.
    #[inline]
    pub fn get(&self, image: usize, id: u32) -> Option<&TypeInfo> {
        self.images.get(image)?.get(id as usize)?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_type_is_resolved_once_with_its_owner_chain_and_value_names() {
        let mut t = TypeTable::default();
        t.define(
            1,
            &Record::EventTypeDef {
                id: 2,
                device: 0,
                flags: TYPE_ACCOUNT,
                event_type: &b"MYPOOL"[..],
                name: &b""[..],
                attrs: &b"owner:kv@layer0,heap:main"[..],
                values: &b"arena,bin"[..],
            },
        );
        assert!(t.get(0, 2).is_none(), "types are per image");
        let ty = t.get(1, 2).unwrap();
        assert_eq!(ty.event_type.as_str(), "MYPOOL");
        assert!(ty.account);
        assert_eq!(ty.owner.to_string(), "MYPOOL@kv@layer0");
        let mut buf = [0u8; 16];
        let n = memscope_wire::encode_values(&[3, 700], &mut buf);
        assert_eq!(
            ty.pairs_with(&buf[..n]),
            [("heap", "main"), ("arena", "3"), ("bin", "700")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        assert_eq!(ty.device(|d| d + 4), Device::Npu(4));
    }
}
