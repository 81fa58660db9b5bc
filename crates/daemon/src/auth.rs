//! The bearer token check (`authorization: Bearer TOKEN`), when a token is configured.

use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Equal strings, in time that does not depend on where they differ (tokens, job tokens).
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[derive(Debug, Clone)]
pub struct Check {
    expected: Option<String>,
}

impl Check {
    pub fn new(token: Option<String>) -> Self {
        Self {
            expected: token.map(|t| format!("Bearer {t}")),
        }
    }
}

impl Interceptor for Check {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(want) = &self.expected else {
            return Ok(req);
        };
        let got = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if same(got, want) {
            Ok(req)
        } else {
            Err(Status::unauthenticated(
                "missing or wrong bearer token (authorization: Bearer TOKEN)",
            ))
        }
    }
}

/// Adds the token to a client's requests.
#[derive(Debug, Clone)]
pub struct Bearer {
    value: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl Bearer {
    pub fn new(token: Option<&str>) -> Result<Self, Status> {
        let value = token
            .map(|t| {
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| Status::invalid_argument("the token is not printable ASCII"))
            })
            .transpose()?;
        Ok(Self { value })
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.value {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}
