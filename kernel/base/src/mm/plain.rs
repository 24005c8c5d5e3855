//! Plain data: values copied byte for byte between the kernel and user memory.

use crate::arch::user::{copy_from_user, copy_to_user, BadAddress};

/// A type whose every byte pattern is a valid value and which has no padding, so its bytes
/// can be read from and written to user memory as they are.
///
/// # Safety
/// Implement only for types of integers, raw pointers and arrays of such, `repr(C)` with no
/// implicit padding (every byte belongs to a field).
pub unsafe trait Plain: Copy + 'static {}

macro_rules! plain {
    ($($type:ty),* $(,)?) => {
        // SAFETY: integers, or `repr(C)` structs of integers (and, in `iovec`, a raw pointer)
        // whose fields leave no gap: every byte pattern is valid and every byte is a field's.
        $(unsafe impl Plain for $type {})*
    };
}

plain!(u8, u16, u32, u64, i8, i16, i32, i64, usize, isize);
plain!(
    linux_raw_sys::general::timespec,
    linux_raw_sys::general::timeval,
    linux_raw_sys::general::iovec,
    linux_raw_sys::general::pollfd,
    linux_raw_sys::general::rlimit64,
    linux_raw_sys::general::stat,
    linux_raw_sys::system::new_utsname,
    abi::call::CoreTimes,
);

// The structs above have no gap: their sizes are the sums of their fields'.
const _: () = {
    use core::mem::size_of;
    use linux_raw_sys::general as linux;
    assert!(size_of::<linux::stat>() == 3 * 8 + 4 * 4 + 4 * 8 + 6 * 8 + 3 * 8);
    assert!(size_of::<linux::pollfd>() == 4 + 2 + 2);
    assert!(size_of::<linux_raw_sys::system::new_utsname>() == 6 * 65);
    assert!(size_of::<abi::call::CoreTimes>() == 5 * 8);
};

// SAFETY: an array of plain values has no gap between its elements and accepts any bytes.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

/// A value of all zero bytes.
pub fn zeroed<T: Plain>() -> T {
    // SAFETY: every byte pattern is a valid `T` (`Plain`), all zeroes included.
    unsafe { core::mem::zeroed() }
}

/// The bytes of `value`.
pub fn bytes_of<T: Plain>(value: &T) -> &[u8] {
    // SAFETY: `T` has no padding (`Plain`), so every byte of the value is initialised; the
    // slice covers exactly the value and borrows it.
    unsafe { core::slice::from_raw_parts((value as *const T).cast::<u8>(), core::mem::size_of::<T>()) }
}

/// Reads a plain value from user address `address`.
pub fn read_user<T: Plain>(address: u64) -> Result<T, BadAddress> {
    let mut value = zeroed::<T>();
    // SAFETY: the slice covers exactly `value`, which it borrows mutably; any bytes written
    // through it leave a valid `T` (`Plain`).
    let bytes = unsafe { core::slice::from_raw_parts_mut((&raw mut value).cast::<u8>(), core::mem::size_of::<T>()) };
    copy_from_user(bytes, address)?;
    Ok(value)
}

/// Writes a plain value to user address `address`.
pub fn write_user<T: Plain>(address: u64, value: &T) -> Result<(), BadAddress> {
    copy_to_user(address, bytes_of(value))
}
