//! The job's process groups as passed to every process in `QCG_GROUPS`: a compact
//! list `NAME:COUNT,NAME:COUNT,…` in rank order (the first COUNT ranks are the first
//! group, and so on). `%`, `,` and `:` inside a name are written `%25`, `%2C` and
//! `%3A`.
//!
//! ```
//! use qcg_wire::groups::{decode, encode};
//! let g = vec![("central_master".to_string(), 1), ("a,b".to_string(), 3)];
//! assert_eq!(encode(&g), "central_master:1,a%2Cb:3");
//! assert_eq!(decode("central_master:1,a%2Cb:3").unwrap(), g);
//! ```

/// The variable's name.
pub const ENV_GROUPS: &str = "QCG_GROUPS";

fn escape(name: &str) -> String {
    name.replace('%', "%25")
        .replace(',', "%2C")
        .replace(':', "%3A")
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3).unwrap_or("");
        out.push(match code {
            "25" => '%',
            "2C" | "2c" => ',',
            "3A" | "3a" => ':',
            _ => return Err(format!("bad escape `%{code}` in group name `{s}`")),
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Writes groups (name, number of processes) in rank order.
pub fn encode(groups: &[(String, u32)]) -> String {
    groups
        .iter()
        .map(|(n, c)| format!("{}:{c}", escape(n)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads what [`encode`] wrote. Every group has a name and at least one process.
pub fn decode(s: &str) -> Result<Vec<(String, u32)>, String> {
    s.split(',')
        .map(|item| {
            let (name, count) = item
                .rsplit_once(':')
                .ok_or_else(|| format!("`{item}` is not NAME:COUNT"))?;
            let count: u32 = count
                .parse()
                .ok()
                .filter(|&c| c > 0)
                .ok_or_else(|| format!("`{count}` in `{item}` is not a count >= 1"))?;
            let name = unescape(name)?;
            if name.is_empty() {
                return Err(format!("`{item}` has an empty group name"));
            }
            Ok((name, count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let g = vec![("x%y:z".to_string(), 2), ("w".to_string(), 1)];
        assert_eq!(decode(&encode(&g)).unwrap(), g);
        for bad in ["", "a", "a:0", "a:x", ":3", "a%zz:1"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }
}
