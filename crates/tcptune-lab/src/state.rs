//! What a lab records about itself in `/run/tcptune/<lab>/state.json`: its spec, who builds it
//! and who it lives with, its emulator, and the global sysctls it changed (to restore at
//! `down`). Read and written through [`Effects`], so the lab's logic is tested on the fake.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tcptune_os::sysctl;

use crate::effects::Effects;
use crate::os::ProcessRef;
use crate::spec::LabSpec;
use crate::LabError;

/// A global sysctl the lab changed, to restore at `down`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GlobalChange {
    /// Dotted sysctl name, e.g. `net.core.rmem_max`.
    pub key: String,
    /// The value before the lab changed it, restored at `lab down`.
    pub original: String,
    /// The value the lab set.
    pub value: String,
}

/// What `/run/tcptune/<lab>/state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct State {
    pub name: String,
    /// The `lab up` process while it builds the lab.
    pub owner_pid: u32,
    /// Its start time (0 in states written before it was recorded).
    #[serde(default)]
    pub owner_start: u64,
    /// The process the lab lives with, if any (`lab run`): when it is gone, the lab is a
    /// leftover even though its emulator still runs.
    #[serde(default)]
    pub tied_to: Option<ProcessRef>,
    pub ready: bool,
    pub emulator_pid: Option<u32>,
    pub spec: LabSpec,
    /// Written before each change, so a kill between recording and changing restores a value
    /// equal to the current one (harmless).
    pub globals: Vec<GlobalChange>,
}

impl State {
    /// A lab about to be built by `owner`.
    pub fn new(lab: &str, spec: LabSpec, owner: ProcessRef, tied_to: Option<ProcessRef>) -> State {
        State {
            name: lab.into(),
            owner_pid: owner.pid,
            owner_start: owner.start,
            tied_to,
            ready: false,
            emulator_pid: None,
            spec,
            globals: Vec::new(),
        }
    }

    /// The `lab up` that builds it (a start time of 0 matches any process with its PID).
    pub fn owner(&self) -> ProcessRef {
        ProcessRef {
            pid: self.owner_pid,
            start: self.owner_start,
        }
    }

    /// The `lab up` that builds it still runs.
    pub fn owner_alive(&self, fx: &mut dyn Effects) -> bool {
        fx.alive(self.owner())
    }

    /// The process the lab is tied to (if any) still runs.
    pub fn tie_holds(&self, fx: &mut dyn Effects) -> bool {
        self.tied_to.is_none_or(|p| fx.alive(p))
    }

    pub fn to_json(&self) -> Result<String, LabError> {
        serde_json::to_string_pretty(self).map_err(|e| LabError::Environment(e.to_string()))
    }

    /// The global changes as the one sysctl snapshot (restored newest first).
    pub fn globals_snapshot(&self) -> sysctl::Snapshot {
        sysctl::Snapshot {
            changes: self
                .globals
                .iter()
                .map(|g| sysctl::Change {
                    key: g.key.clone(),
                    original: g.original.clone(),
                    value: g.value.clone(),
                })
                .collect(),
        }
    }

    /// Takes the snapshot's changes as the lab's global changes.
    pub fn set_globals(&mut self, snap: sysctl::Snapshot) {
        self.globals = snap
            .changes
            .into_iter()
            .map(|c| GlobalChange {
                key: c.key,
                original: c.original,
                value: c.value,
            })
            .collect();
    }
}

pub(crate) fn read_state(fx: &mut dyn Effects, lab: &str) -> Option<State> {
    serde_json::from_str(&fx.read_state(lab)?).ok()
}

pub(crate) fn write_state(fx: &mut dyn Effects, st: &State) -> Result<(), LabError> {
    fx.write_state(&st.name, &st.to_json()?)
}
