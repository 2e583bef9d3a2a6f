//! TCP sequence numbers compared modulo 2^32 (RFC 9293 §3.4): the signed 32-bit distance from
//! one to another, and Wireshark's comparisons over it (`GT_SEQ`, `LT_SEQ`, `LE_SEQ` in
//! <https://gitlab.com/wireshark/wireshark/-/blob/release-4.0/epan/dissectors/packet-tcp.h>).
//! Every sequence comparison of the analyzer goes through here.

/// How far `x` is after `y` in sequence space: positive when `x` is later, negative when it is
/// earlier (numbers 2^31 apart read as earlier).
pub fn diff(x: u32, y: u32) -> i32 {
    x.wrapping_sub(y) as i32
}

/// `x` is after `y` (Wireshark's `GT_SEQ(x, y)`).
pub fn gt(x: u32, y: u32) -> bool {
    diff(y, x) < 0
}

/// `x` is before `y` (`LT_SEQ(x, y)`).
pub fn lt(x: u32, y: u32) -> bool {
    diff(x, y) < 0
}

/// `x` is before or at `y` (`LE_SEQ(x, y)`).
pub fn le(x: u32, y: u32) -> bool {
    diff(x, y) <= 0
}

/// `seq` as an offset from `base`, for series and matching that count bytes from a flow's
/// first sequence number.
pub fn rel(base: u32, seq: u32) -> i64 {
    i64::from(diff(seq, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_wrap_around_zero() {
        assert!(gt(5, u32::MAX - 5));
        assert!(lt(u32::MAX - 5, 5));
        assert!(le(7, 7) && !lt(7, 7) && !gt(7, 7));
        assert_eq!(diff(5, u32::MAX - 5), 11);
        assert_eq!(rel(u32::MAX, 9), 10);
        assert_eq!(rel(10, 4), -6);
    }

    #[test]
    fn half_the_space_apart_reads_as_earlier() {
        let (x, y) = (1u32 << 31, 0);
        assert_eq!(diff(x, y), i32::MIN);
        assert!(lt(x, y) && lt(y, x));
        assert!(gt(x, y) && gt(y, x));
    }
}
