use blst::BLST_ERROR;

/// Why bytes could not be decoded into a field element or a group element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("field element is not canonical: it is not less than the modulus")]
    NonCanonical,
    #[error("malformed point encoding: bad flag bits, or a coordinate not less than the modulus")]
    BadEncoding,
    #[error("point is not on the curve")]
    NotOnCurve,
    #[error("point is not in the prime-order subgroup")]
    NotInSubgroup,
}

pub(crate) fn check(err: BLST_ERROR) -> Result<(), DecodeError> {
    match err {
        BLST_ERROR::BLST_SUCCESS => Ok(()),
        BLST_ERROR::BLST_POINT_NOT_ON_CURVE => Err(DecodeError::NotOnCurve),
        BLST_ERROR::BLST_POINT_NOT_IN_GROUP => Err(DecodeError::NotInSubgroup),
        _ => Err(DecodeError::BadEncoding),
    }
}
