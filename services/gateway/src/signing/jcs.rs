//! RFC 8785 JSON Canonicalization Scheme (JCS): the bytes a card signature covers.
//!
//! Objects have their members sorted by the UTF-16 code units of their names (not by code
//! points: an astral character sorts before U+FB33), no whitespace is written, strings escape
//! only what JSON requires (with lowercase `\u00xx` for other controls), and numbers are written
//! as ECMAScript's `Number.prototype.toString` writes the IEEE 754 double they denote.
//!
//! Written by `serde_json_canonicalizer` (numbers by `ryu-js`). It replaced a canonicaliser of
//! our own after it wrote the same bytes for every RFC 8785 vector: the sample object (§3.2.2),
//! the sorting example (§3.2.3) and the Appendix B numbers, and for integers beyond 2^53 (written
//! as the double a JavaScript verifier reads). The tests below keep those vectors as the guard.

use serde_json::Value;

/// A value JCS cannot represent (serde_json holds no NaN or infinity, so in practice none).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JcsError(#[from] serde_json::Error);

/// The canonical form of `value`.
pub fn canonical(value: &Value) -> Result<Vec<u8>, JcsError> {
    Ok(serde_json_canonicalizer::to_vec(value)?)
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
            // As a parsed card carries it: a JSON number.
            let n = Value::Number(serde_json::Number::from_f64(x).unwrap());
            assert_eq!(
                String::from_utf8(canonical(&n).unwrap()).unwrap(),
                want,
                "{bits}"
            );
            // And as text, parsed (serde_json's `float_roundtrip` reads the nearest double).
            assert_eq!(
                jcs(&format!("[{x:e}]")),
                format!("[{want}]"),
                "{bits} from text"
            );
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
