//! RFC 8785 JSON Canonicalization Scheme (JCS): the bytes a card signature covers.
//!
//! Objects have their members sorted by the UTF-16 code units of their names (not by code
//! points: an astral character sorts before U+FB33), no whitespace is written, strings escape
//! only what JSON requires (with lowercase `\u00xx` for other controls), and numbers are written
//! as ECMAScript's `Number.prototype.toString` writes the IEEE 754 double they denote.

use serde_json::{Map, Number, Value};

/// A value JCS cannot represent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JcsError {
    /// NaN and the infinities have no JSON form (serde_json cannot hold them either; kept so a
    /// number from any other source is refused rather than written wrongly).
    #[error("a number that is not finite cannot be canonicalised")]
    NotFinite,
}

/// The canonical form of `value`.
pub fn canonical(value: &Value) -> Result<Vec<u8>, JcsError> {
    let mut out = Vec::with_capacity(256);
    write_value(value, &mut out)?;
    Ok(out)
}

fn write_value(value: &Value, out: &mut Vec<u8>) -> Result<(), JcsError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(number(n)?.as_bytes()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(members) => write_object(members, out)?,
    }
    Ok(())
}

fn write_object(members: &Map<String, Value>, out: &mut Vec<u8>) -> Result<(), JcsError> {
    let mut sorted: Vec<(Vec<u16>, &String, &Value)> = members
        .iter()
        .map(|(k, v)| (k.encode_utf16().collect(), k, v))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    out.push(b'{');
    for (i, (_, name, value)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(name, out);
        out.push(b':');
        write_value(value, out)?;
    }
    out.push(b'}');
    Ok(())
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{08}' => out.extend_from_slice(b"\\b"),
            '\u{0c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// A JSON number as the double it denotes, written the ECMAScript way. Integers beyond 2^53
/// lose precision exactly as they would in a JavaScript verifier.
fn number(n: &Number) -> Result<String, JcsError> {
    let exact = |i: i128| i.unsigned_abs() <= 1u128 << 53;
    if let Some(i) = n.as_i64().map(i128::from).filter(|&i| exact(i)) {
        return Ok(i.to_string());
    }
    if let Some(u) = n.as_u64().map(i128::from).filter(|&u| exact(u)) {
        return Ok(u.to_string());
    }
    let f = n.as_f64().ok_or(JcsError::NotFinite)?;
    es_number(f)
}

/// ECMAScript `Number::toString(x)` (ECMA-262 §6.1.6.1.20) for a finite double: the shortest
/// digits that round-trip, the closest to `x` among those (what Ryu computes), placed by the
/// exponent.
pub fn es_number(x: f64) -> Result<String, JcsError> {
    if !x.is_finite() {
        return Err(JcsError::NotFinite);
    }
    if x == 0.0 {
        return Ok("0".into()); // -0 too
    }
    let mut buf = ryu::Buffer::new();
    let (digits, n) = decimal(buf.format_finite(x.abs()));
    let k = digits.len() as i32;
    let mut s = String::with_capacity(32);
    if x < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-n) as usize));
        s.push_str(&digits);
    } else {
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if n - 1 < 0 { '-' } else { '+' });
        s.push_str(&(n - 1).abs().to_string());
    }
    Ok(s)
}

/// The significant digits `d1…dk` of a positive decimal (`123.45`, `1e23`, `1.5e-7`) and the
/// exponent `n` with value = 0.d1…dk × 10^n.
fn decimal(text: &str) -> (String, i32) {
    let (mantissa, exp) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().expect("an integer exponent")),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_matches('0').to_owned();
    let n = int.len() as i32 - lead as i32 + exp;
    (digits, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jcs(json: &str) -> String {
        let value: Value = serde_json::from_str(json).unwrap();
        String::from_utf8(canonical(&value).unwrap()).unwrap()
    }

    /// RFC 8785 §3.2.2 (the sample object): literals, numbers and string escaping.
    #[test]
    fn rfc8785_sample_object() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        assert_eq!(
            jcs(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    /// RFC 8785 §3.2.3: members sorted by UTF-16 code units.
    #[test]
    fn rfc8785_sorting() {
        let input = r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        assert_eq!(
            jcs(input),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
             \"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\
             \"😀\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
            "the order of RFC 8785 §3.2.3"
        );
    }

    /// RFC 8785 Appendix B: IEEE 754 doubles and their canonical text.
    #[test]
    fn rfc8785_appendix_b_numbers() {
        let table = [
            ("0000000000000000", "0"),
            ("8000000000000000", "0"),
            ("0000000000000001", "5e-324"),
            ("8000000000000001", "-5e-324"),
            ("7fefffffffffffff", "1.7976931348623157e+308"),
            ("ffefffffffffffff", "-1.7976931348623157e+308"),
            ("4340000000000000", "9007199254740992"),
            ("c340000000000000", "-9007199254740992"),
            ("4430000000000000", "295147905179352830000"),
            ("44b52d02c7e14af5", "9.999999999999997e+22"),
            ("44b52d02c7e14af6", "1e+23"),
            ("44b52d02c7e14af7", "1.0000000000000001e+23"),
            ("444b1ae4d6e2ef4e", "999999999999999700000"),
            ("444b1ae4d6e2ef4f", "999999999999999900000"),
            ("444b1ae4d6e2ef50", "1e+21"),
            ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
            ("3eb0c6f7a0b5ed8d", "0.000001"),
            ("41b3de4355555553", "333333333.3333332"),
            ("41b3de4355555554", "333333333.33333325"),
            ("41b3de4355555555", "333333333.3333333"),
            ("41b3de4355555556", "333333333.3333334"),
            ("41b3de4355555557", "333333333.33333343"),
            ("becbf647612f3696", "-0.0000033333333333333333"),
            ("43143ff3c1cb0959", "1424953923781206.2"),
        ];
        for (bits, want) in table {
            let x = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
            assert_eq!(es_number(x).unwrap(), want, "{bits}");
            // The same through a JSON value (as a parsed card carries it).
            if let Some(n) = Number::from_f64(x) {
                assert_eq!(number(&n).unwrap(), want, "{bits} as a JSON number");
            }
        }
        for bits in ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"] {
            let x = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
            assert_eq!(es_number(x), Err(JcsError::NotFinite), "{bits}");
        }
    }

    #[test]
    fn integers_are_doubles() {
        assert_eq!(
            jcs("[0, -0, 1, -1, 9007199254740992]"),
            "[0,0,1,-1,9007199254740992]"
        );
        // Beyond 2^53 an integer is the double nearest to it, as JavaScript reads it.
        assert_eq!(jcs("[9007199254740993]"), "[9007199254740992]");
        assert_eq!(jcs("[18446744073709551615]"), "[18446744073709552000]");
        assert_eq!(jcs("[1.0, 100, 1e2, 1e21, 1e-7]"), "[1,100,100,1e+21,1e-7]");
    }

    #[test]
    fn nesting_and_whitespace() {
        assert_eq!(
            jcs(r#" { "b" : [ { "z":1, "a":{} } , [] ], "a" : "\u0001\u001f\u007f" } "#),
            "{\"a\":\"\\u0001\\u001f\u{7f}\",\"b\":[{\"a\":{},\"z\":1},[]]}"
        );
    }
}
