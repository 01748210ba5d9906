//! One gate process's view of the shared world: every host call yields to the scheduler
//! first (so shuttle may run any other gate's call, or a fault, in between), is refused when
//! the process died, and is logged with its result.

use crate::replica::Service;
use crate::world::World;
use mrtr_gate_core::host::{
    AppendOutcome, Audit, AuditEntry, Clock, Consent, ConsentPrompt, ConsentReceipt, DuePage, Host,
    HostError, ReadKey, Storage, Versioned, Write,
};
use std::sync::Arc;

/// Which host calls are scheduling points. Storage and audit calls always are. The clock and
/// the consent provider are when a fault of the run can change them; otherwise their calls
/// commute with every other step, and a yield there would only multiply schedules that
/// are the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Points {
    /// Clock reads yield.
    pub clock: bool,
    /// Consent requests yield.
    pub consent: bool,
}

/// The host of gate `gate` (its `life`-th process) over the shared world.
pub struct GateHost {
    world: Arc<World>,
    gate: usize,
    life: u32,
    points: Points,
}

impl GateHost {
    /// The host of the `life`-th process of gate `gate`.
    pub fn new(world: Arc<World>, gate: usize, life: u32, points: Points) -> Self {
        Self {
            world,
            gate,
            life,
            points,
        }
    }

    /// A scheduling point, then whether the process still lives.
    fn step(&self, point: bool, call: &str) -> Result<(), HostError> {
        if point {
            shuttle::thread::yield_now();
        }
        if self.world.is_dead(self.gate) {
            self.note(format!("{call}: process dead, nothing done"));
            return Err(HostError::new("the gate's process died"));
        }
        Ok(())
    }

    /// The WAIT that ends a write call to `service` whose write got `number` on a replicated
    /// service, when the host waits for the replica: a scheduling point (other clients'
    /// commands run on the master meanwhile, a promotion may come), then the replica's answer.
    fn wait(&self, service: Service, number: Option<u64>) -> Result<(), HostError> {
        let Some(number) = number.filter(|_| self.world.waits(service)) else {
            return Ok(());
        };
        shuttle::thread::yield_now();
        if self.world.is_dead(self.gate) {
            // It never hears the answer: its write stays on the master, in doubt.
            self.note(format!("WAIT {service:?} write {number}: process dead"));
            return Err(HostError::new("the gate's process died"));
        }
        let answer = self.world.wait(service, number);
        match &answer {
            Ok(()) => self.note(format!(
                "WAIT {service:?} write {number} -> held by the replica"
            )),
            Err(e) => self.note(format!("WAIT {service:?} write {number} -> {e}")),
        }
        answer
    }

    fn note(&self, what: String) {
        self.world
            .note(format!("g{}.{} {what}", self.gate, self.life));
    }
}

/// A storage key as the log shows it: the request id it names (the server part is the same
/// in every key of a run).
fn short(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, id)| id)
}

impl Clock for GateHost {
    fn now_ms(&self) -> u64 {
        if self.step(self.points.clock, "clock").is_err() {
            // A dead process reads no clock: 0 is out of the gate's range, so the call is
            // refused before it touches anything.
            return 0;
        }
        let now = self.world.now_ms();
        if self.points.clock {
            self.note(format!(
                "clock -> T0+{}",
                now.wrapping_sub(crate::world::T0)
            ));
        }
        now
    }
}

impl Storage for GateHost {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        self.step(true, "storage.read")?;
        let found = self.world.read(keys);
        let asked: Vec<String> = keys
            .iter()
            .map(|k| format!("{}(have {})", short(k.key), k.have))
            .collect();
        let got: Vec<String> = found
            .iter()
            .map(|v| match (v.version, v.value.is_empty()) {
                (0, _) => "absent".to_owned(),
                (n, true) => format!("v{n:#x} withheld"),
                (n, false) => format!("v{n:#x} {}B", v.value.len()),
            })
            .collect();
        self.note(format!("storage.read {asked:?} -> {got:?}"));
        Ok(found)
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.step(true, "storage.write")?;
        let (applied, number) = self.world.write(writes);
        let asked: Vec<String> = writes
            .iter()
            .map(|w| {
                let what = if w.value.is_some() { "put" } else { "delete" };
                format!("{what} {} if v{:#x}", short(w.key), w.expected)
            })
            .collect();
        let got: Vec<String> = applied.iter().map(|v| format!("v{v:#x}")).collect();
        self.note(format!("storage.write {asked:?} -> applied {got:?}"));
        // A write the host reports failed is in doubt (applied on the master, maybe lost, maybe
        // not): the gate cannot know what it put, so only a confirmed write's puts are its own.
        self.wait(Service::Store, number)?;
        self.world.record_puts(self.gate, writes, &applied);
        Ok(applied)
    }

    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        self.step(true, "storage.list_due")?;
        let page = self.world.list_due(due_by_ms, cursor, limit);
        match &page {
            Ok(p) => {
                let keys: Vec<&str> = p.keys.iter().map(|k| short(k)).collect();
                self.note(format!("storage.list_due -> {keys:?}"));
            }
            Err(e) => self.note(format!("storage.list_due -> {e}")),
        }
        page
    }
}

impl Consent for GateHost {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        self.step(self.points.consent, "consent")?;
        let receipt = self.world.consent(prompt);
        self.note(format!(
            "consent view {} answers {} -> {} {:?}{}",
            prompt.view_sha256.get(..8).unwrap_or(""),
            prompt.responses_json,
            receipt.receipt_id,
            receipt.decision,
            if receipt.view_sha256 == prompt.view_sha256 {
                ""
            } else {
                " for another view"
            }
        ));
        Ok(receipt)
    }
}

impl Audit for GateHost {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        self.step(true, "audit.append")?;
        let (outcome, number) = self.world.append(entry);
        let event: serde_json::Value = serde_json::from_str(&entry.line).unwrap_or_default();
        let state = event
            .get("state_sha256")
            .and_then(serde_json::Value::as_str)
            .and_then(|s| s.get(..8))
            .unwrap_or("-");
        let what = match &outcome {
            Ok(o) if o.written => "written".to_owned(),
            Ok(o) => format!("not written, head at {}", o.head_seq),
            Err(e) => format!("{e}"),
        };
        self.note(format!(
            "audit.append seq {} {} request_id {} round {} state {} outcome {} code {} -> {what}",
            entry.seq,
            event.get("event").unwrap_or(&serde_json::Value::Null),
            event.get("request_id").unwrap_or(&serde_json::Value::Null),
            event.get("round").unwrap_or(&serde_json::Value::Null),
            state,
            event.get("outcome").unwrap_or(&serde_json::Value::Null),
            event.get("reason").unwrap_or(&serde_json::Value::Null),
        ));
        if matches!(&outcome, Ok(o) if o.written) {
            self.world.check_trail();
            if let Err(e) = self.wait(Service::Sink, number) {
                self.world.doubt_line(&entry.line);
                return Err(e);
            }
            self.world.confirm_line(&entry.line);
        }
        outcome
    }
}

impl Host for GateHost {
    fn clock(&self) -> &dyn Clock {
        self
    }
    fn storage(&self) -> &dyn Storage {
        self
    }
    fn consent(&self) -> &dyn Consent {
        self
    }
    fn audit(&self) -> &dyn Audit {
        self
    }
}
