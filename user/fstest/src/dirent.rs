//! Reading the `linux_dirent64` records `getdents64` writes, checking every length.

/// `struct linux_dirent64`: `d_ino` (8 bytes), `d_off` (8), `d_reclen` (2), `d_type` (1), then
/// the NUL-terminated name, the record padded to 8 bytes [getdents64(2)].
const NAME_OFFSET: usize = 19;

/// The names in `records`, in order; an error says which record is malformed.
pub fn names(records: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut names = Vec::new();
    let mut offset = 0;
    while offset < records.len() {
        let rest = &records[offset..];
        let length = match rest.get(16..18) {
            Some(bytes) => usize::from(u16::from_ne_bytes([bytes[0], bytes[1]])),
            None => return Err(format!("a record at byte {offset} is cut short ({} bytes left)", rest.len())),
        };
        if length <= NAME_OFFSET || length > rest.len() {
            return Err(format!("the record at byte {offset} says d_reclen {length}, {} bytes left", rest.len()));
        }
        let name = &rest[NAME_OFFSET..length];
        let Some(end) = name.iter().position(|&byte| byte == 0) else {
            return Err(format!("the name at byte {offset} has no NUL within its record"));
        };
        names.push(name[..end].to_vec());
        offset += length;
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &[u8]) -> Vec<u8> {
        let length = (NAME_OFFSET + name.len() + 1).next_multiple_of(8);
        let mut bytes = vec![0u8; length];
        bytes[..8].copy_from_slice(&7u64.to_ne_bytes());
        bytes[16..18].copy_from_slice(&(length as u16).to_ne_bytes());
        bytes[18] = libc::DT_REG;
        bytes[NAME_OFFSET..NAME_OFFSET + name.len()].copy_from_slice(name);
        bytes
    }

    #[test]
    fn reads_every_record() {
        let records: Vec<u8> = [&b"."[..], b"..", b"a-longer-name"].iter().flat_map(|name| record(name)).collect();
        assert_eq!(names(&records).unwrap(), [&b"."[..], b"..", b"a-longer-name"]);
        assert_eq!(names(&[]).unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn refuses_malformed_records() {
        let good = record(b"name");
        assert!(names(&good[..10]).unwrap_err().contains("cut short"));
        assert!(names(&good[..good.len() - 1]).unwrap_err().contains("d_reclen"));
        let mut zero = good.clone();
        zero[16..18].copy_from_slice(&0u16.to_ne_bytes());
        assert!(names(&zero).unwrap_err().contains("d_reclen 0"));
        let mut unterminated = good.clone();
        unterminated[NAME_OFFSET..].fill(b'x');
        assert!(names(&unterminated).unwrap_err().contains("no NUL"));
    }
}
