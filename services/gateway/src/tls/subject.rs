//! A certificate subject as an RFC 4514 string (`CN=alice,O=Example`): the mTLS principal.
//! rustls-webpki hands out the subject's raw DER; this reads its attributes (a short, fixed
//! structure, so no general ASN.1 parser is pulled in for it).

use rustls_pki_types::CertificateDer;

/// The subject of `cert` (DER) as an RFC 4514 distinguished name: RDNs last-to-first,
/// well-known attribute types by name, others by dotted OID with the value as `#hex`.
pub fn distinguished_name(cert: &CertificateDer<'_>) -> Result<String, String> {
    let parsed = webpki::EndEntityCert::try_from(cert).map_err(|e| format!("certificate: {e}"))?;
    let mut rdns = Vec::new();
    let mut names = Der(parsed.subject());
    while !names.0.is_empty() {
        let mut set = Der(names.take(0x31)?);
        let mut attrs = Vec::new();
        while !set.0.is_empty() {
            let mut attr = Der(set.take(0x30)?);
            let oid = attr.take(0x06)?;
            let (tag, value) = attr.any()?;
            attrs.push(attribute(oid, tag, value));
        }
        rdns.push(attrs.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    /// The next element's (tag, contents).
    fn any(&mut self) -> Result<(u8, &'a [u8]), String> {
        let bad = || "certificate subject: malformed DER".to_owned();
        let (&tag, rest) = self.0.split_first().ok_or_else(bad)?;
        let (&first, mut rest) = rest.split_first().ok_or_else(bad)?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err(bad());
            }
            let (digits, tail) = rest.split_at(n);
            rest = tail;
            digits
                .iter()
                .fold(0usize, |acc, &d| (acc << 8) | usize::from(d))
        };
        if rest.len() < len {
            return Err(bad());
        }
        let (contents, tail) = rest.split_at(len);
        self.0 = tail;
        Ok((tag, contents))
    }

    fn take(&mut self, want: u8) -> Result<&'a [u8], String> {
        match self.any()? {
            (tag, contents) if tag == want => Ok(contents),
            (tag, _) => Err(format!(
                "certificate subject: tag {tag:#04x} where {want:#04x} belongs"
            )),
        }
    }
}

fn attribute(oid: &[u8], tag: u8, value: &[u8]) -> String {
    let name = match oid {
        [0x55, 0x04, 0x03] => "CN".to_owned(),
        [0x55, 0x04, 0x06] => "C".to_owned(),
        [0x55, 0x04, 0x07] => "L".to_owned(),
        [0x55, 0x04, 0x08] => "ST".to_owned(),
        [0x55, 0x04, 0x0a] => "O".to_owned(),
        [0x55, 0x04, 0x0b] => "OU".to_owned(),
        [0x55, 0x04, 0x09] => "STREET".to_owned(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC".to_owned(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID".to_owned(),
        _ => dotted(oid),
    };
    // UTF8String, PrintableString, IA5String, TeletexString (read as Latin-1-ish bytes).
    let text = match tag {
        0x0c | 0x13 | 0x16 | 0x14 => std::str::from_utf8(value).ok(),
        _ => None,
    };
    match text {
        Some(t) if !name.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{name}={}", escape(t))
        }
        _ => {
            // RFC 4514 §2.4: the BER encoding of the value, in hex.
            let mut hex = format!("{name}=#{tag:02x}");
            let len = value.len();
            let length: Vec<u8> = match len {
                0..=0x7f => vec![len as u8],
                0x80..=0xff => vec![0x81, len as u8],
                _ => vec![0x82, (len >> 8) as u8, len as u8],
            };
            for b in length.iter().chain(value) {
                hex.push_str(&format!("{b:02x}"));
            }
            hex
        }
    }
}

fn dotted(oid: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut acc: u64 = 0;
    for &b in oid {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            // The first sub-identifier packs the first two arcs (X.690 §8.19.4).
            if parts.is_empty() {
                let (first, second) = if acc < 80 {
                    (acc / 40, acc % 40)
                } else {
                    (2, acc - 80)
                };
                parts.push(first.to_string());
                parts.push(second.to_string());
            } else {
                parts.push(acc.to_string());
            }
            acc = 0;
        }
    }
    parts.join(".")
}

/// RFC 4514 §2.4 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, '"' | '+' | ',' | ';' | '<' | '>' | '\\')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if c == '\0' {
            out.push_str("\\00");
            continue;
        }
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_reads_as_rfc4514_with_escapes_and_unknown_types_in_hex() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Example, Inc.");
        dn.push(rcgen::DnType::CommonName, "alice");
        dn.push(
            rcgen::DnType::CustomDnType(vec![2, 5, 4, 5]),
            rcgen::DnValue::PrintableString("42".try_into().unwrap()),
        );
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let name = distinguished_name(cert.der()).unwrap();
        assert_eq!(name, r"2.5.4.5=#13023432,CN=alice,O=Example\, Inc.,C=DE");
    }
}
