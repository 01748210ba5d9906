//! The guest could not answer: it trapped, ran out of fuel or past its deadline, or could not
//! be instantiated. The call is denied (the host's fault, never audited) and the instance
//! replaced; the wasmtime error is the denial's source.

use mrtr_gate_host::{DenialCode, GateDenial};

/// The denial for the wasmtime error `e` of a call into the guest.
pub(crate) fn denial_of(e: wasmtime::Error) -> GateDenial {
    let (code, message) = match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => (
            DenialCode::GuestOutOfFuel,
            "the gate ran out of fuel; the call is denied and the instance replaced",
        ),
        Some(wasmtime::Trap::Interrupt) => (
            DenialCode::GuestDeadlineExceeded,
            "the gate ran past its deadline; the call is denied and the instance replaced",
        ),
        _ => (
            DenialCode::GuestTrapped,
            "the gate trapped; the call is denied and the instance replaced",
        ),
    };
    GateDenial::engine_failed(code, message, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrtr_gate_core::ErrorCause;

    #[test]
    fn a_trap_is_the_hosts_unaudited_denial_with_the_trap_as_its_source() {
        let d = denial_of(wasmtime::Error::new(wasmtime::Trap::OutOfFuel));
        assert_eq!(d.code, DenialCode::GuestOutOfFuel);
        assert_eq!(d.cause, ErrorCause::Host);
        assert!(!d.audited);
        let source = std::error::Error::source(&d).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some(wasmtime::Trap::OutOfFuel.to_string().as_str())
        );
        let d = denial_of(wasmtime::Error::new(wasmtime::Trap::Interrupt));
        assert_eq!(d.code, DenialCode::GuestDeadlineExceeded);
        let d = denial_of(wasmtime::Error::msg("boom"));
        assert_eq!(d.code, DenialCode::GuestTrapped);
    }
}
