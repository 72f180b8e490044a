//! Just enough DER to read a certificate's serial number and validity: `qcg ca revoke`
//! needs the serial of a certificate on disk, and tests check the lifetimes `qcg ca
//! issue` gives. Everything else about certificates is webpki's business.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A certificate's serial and validity window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// Serial number, big-endian, as encoded (a leading zero byte kept).
    pub serial: Vec<u8>,
    /// Not valid before.
    pub not_before: SystemTime,
    /// Not valid after.
    pub not_after: SystemTime,
}

/// Why a certificate could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed certificate at byte {at}: {what}")]
pub struct DerError {
    /// Offset into the DER.
    pub at: usize,
    /// What was expected.
    pub what: &'static str,
}

struct Reader<'a> {
    der: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, what: &'static str) -> DerError {
        DerError { at: self.pos, what }
    }

    /// Reads one element: its tag and contents.
    fn element(&mut self) -> Result<(u8, Reader<'a>), DerError> {
        let tag = *self.der.get(self.pos).ok_or(self.err("a tag"))?;
        let first = *self.der.get(self.pos + 1).ok_or(self.err("a length"))?;
        let mut at = self.pos + 2;
        let len = if first < 0x80 {
            first as usize
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 {
                return Err(self.err("a definite length of at most 4 bytes"));
            }
            let bytes = self
                .der
                .get(at..at + n)
                .ok_or(self.err("the length's bytes"))?;
            at += n;
            bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize)
        };
        let end = at.checked_add(len).ok_or(self.err("a sane length"))?;
        if end > self.der.len() {
            return Err(self.err("contents as long as the length says"));
        }
        let inner = Reader {
            der: &self.der[..end],
            pos: at,
        };
        self.pos = end;
        Ok((tag, inner))
    }

    fn expect(&mut self, tag: u8, what: &'static str) -> Result<Reader<'a>, DerError> {
        let at = self.pos;
        let (t, r) = self.element()?;
        if t != tag {
            return Err(DerError { at, what });
        }
        Ok(r)
    }

    fn rest(&self) -> &'a [u8] {
        &self.der[self.pos..]
    }
}

fn digits(s: &[u8], at: usize) -> Result<u64, DerError> {
    s.iter().try_fold(0u64, |acc, c| {
        if c.is_ascii_digit() {
            Ok(acc * 10 + u64::from(c - b'0'))
        } else {
            Err(DerError {
                at,
                what: "a time of digits",
            })
        }
    })
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u64, d: u64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn time(tag: u8, r: &Reader<'_>) -> Result<SystemTime, DerError> {
    let s = r.rest();
    let at = r.pos;
    let bad = DerError {
        at,
        what: "a UTCTime YYMMDDHHMMSSZ or GeneralizedTime YYYYMMDDHHMMSSZ",
    };
    let (year, rest) = match (tag, s.len()) {
        (0x17, 13) => {
            let yy = digits(&s[..2], at)? as i64;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &s[2..])
        }
        (0x18, 15) => (digits(&s[..4], at)? as i64, &s[4..]),
        _ => return Err(bad),
    };
    if rest.last() != Some(&b'Z') {
        return Err(bad);
    }
    let f = |i: usize| digits(&rest[i..i + 2], at);
    let (mo, d, h, mi, sec) = (f(0)?, f(2)?, f(4)?, f(6)?, f(8)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad);
    }
    let secs = days_from_civil(year, mo, d) * 86_400 + (h * 3600 + mi * 60 + sec) as i64;
    Ok(if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    })
}

/// Reads the serial number and validity of a DER certificate.
pub fn cert_info(der: &[u8]) -> Result<CertInfo, DerError> {
    let mut top = Reader { der, pos: 0 };
    let mut cert = top.expect(0x30, "a Certificate SEQUENCE")?;
    let mut tbs = cert.expect(0x30, "a TBSCertificate SEQUENCE")?;
    // The version is optional ([0] EXPLICIT); skip it when present.
    if tbs.rest().first() == Some(&0xa0) {
        tbs.element()?;
    }
    let serial = tbs.expect(0x02, "a serial INTEGER")?.rest().to_vec();
    tbs.expect(0x30, "a signature AlgorithmIdentifier")?;
    tbs.expect(0x30, "an issuer Name")?;
    let mut validity = tbs.expect(0x30, "a Validity SEQUENCE")?;
    let (t1, r1) = validity.element()?;
    let not_before = time(t1, &r1)?;
    let (t2, r2) = validity.element()?;
    let not_after = time(t2, &r2)?;
    Ok(CertInfo {
        serial,
        not_before,
        not_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        for der in [
            &[][..],
            &[0x30],
            &[0x30, 0x85, 1, 1, 1, 1, 1],
            &[0x30, 0x05, 0x30],
        ] {
            assert!(cert_info(der).is_err(), "{der:?}");
        }
    }
}
