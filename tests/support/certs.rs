//! Certificates made by the tests themselves (rcgen): a CA, certificates it signs for
//! `localhost` and 127.0.0.1 (current or expired), and a second CA that nobody trusts.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, date_time_ymd,
};

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM.
pub struct Leaf {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        Self {
            issuer: CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `localhost` and 127.0.0.1; `expired`: it ended in 2020.
    pub fn leaf(&self, name: &str, expired: bool) -> Leaf {
        let mut p =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        if expired {
            p.not_before = date_time_ymd(2019, 1, 1);
            p.not_after = date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

impl Leaf {
    /// Writes `NAME.crt` and `NAME.key` into `dir`; returns their paths.
    #[allow(dead_code)] // not every test target writes them
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, &self.cert).unwrap();
        std::fs::write(&k, &self.key).unwrap();
        (c, k)
    }
}
