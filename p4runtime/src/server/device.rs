//! One P4 switch as P4Runtime sees it: the program it runs and its P4Info, the pipeline a
//! controller set, and what a Write changes and a Read returns. Everything here is
//! synchronous; the gRPC service calls it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use intlab_p4::Datapath;
use intlab_p4::exec::table::InsertError;
use intlab_p4::ir;

use super::CpuPort;
use super::arbitration::Arbitration;
use super::digests::Digests;
use super::entries::{self, canonical, value};
use super::error::UpdateError;
use super::ids::Ids;
use super::meters::{self, MeterTarget};
use super::packet_io::ControllerHeader;
use super::profiles;
use super::replication;
use super::value_sets;
use crate::p4info::{Described, p4info};
use crate::proto::p4::config::v1 as p4i;
use crate::proto::p4::v1 as p4rt;
use p4rt::entity::Entity;
use tonic::Code;

/// What a client asked a device to be set up with.
#[derive(Debug, Clone, Default)]
struct Pipeline {
    /// The P4Info the client sent.
    p4info: Option<p4i::P4Info>,
    /// Its device config, as sent (P4 source, or a BMv2 JSON that intlab does not read).
    device_config: prost::bytes::Bytes,
    cookie: Option<u64>,
}

/// A P4 switch served over P4Runtime.
pub struct Device {
    /// Its name in the lab.
    pub name: String,
    /// Its P4Runtime device id.
    pub device_id: u64,
    datapath: Arc<Datapath>,
    info: p4i::P4Info,
    ids: Ids,
    pipeline: Mutex<Pipeline>,
    /// Controllers' streams and who is primary.
    pub arbitration: Mutex<Arbitration>,
    /// The digests controllers configured, with what each holds for them.
    digests: Mutex<Digests>,
    /// The controller's end of the switch's CPU port, if it has one.
    cpu: Option<CpuPort>,
    /// What a frame to the CPU port starts with.
    packet_in: ControllerHeader,
    /// What a PacketOut is given in front of its payload.
    packet_out: ControllerHeader,
    /// When idle entries were last reported (lab ns), by table and handle: the timer a
    /// report restarts.
    idle_reported: Mutex<BTreeMap<(usize, u32), u64>>,
}

/// What a Write changes outside the tables, done once its edit is kept.
enum AfterEdit {
    /// A register cell: register, cell, value.
    Cell(usize, usize, u128),
    /// A digest's configuration set (`None`: removed).
    Digest(usize, Option<p4rt::digest_entry::Config>),
    /// A meter cell's rates (none: forgotten).
    Meter(MeterTarget, Vec<(f64, u64)>),
    /// An indexed counter's cell set: counter, cell, packets, bytes.
    Counter(usize, usize, u64, u64),
    /// A table entry's direct counter set: packets, bytes.
    DirectCounter(std::sync::Arc<intlab_p4::exec::table::EntryState>, u64, u64),
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({}, id {})", self.name, self.device_id)
    }
}

impl Device {
    /// Device `device_id` for the switch `name` running `datapath`'s program, with the
    /// controller's end of its CPU port, if it has one.
    pub fn new(
        name: &str,
        device_id: u64,
        datapath: Arc<Datapath>,
        cpu: Option<CpuPort>,
    ) -> Result<Device, crate::p4info::ids::IdError> {
        let Described { info, symbols } = p4info(datapath.program())?;
        let ids = Ids::new(datapath.program(), &symbols);
        Ok(Device {
            packet_in: ControllerHeader::of(&info, "packet_in"),
            packet_out: ControllerHeader::of(&info, "packet_out"),
            idle_reported: Mutex::default(),
            cpu,
            name: name.to_owned(),
            device_id,
            datapath,
            info,
            ids,
            pipeline: Mutex::default(),
            arbitration: Mutex::new(Arbitration::new(device_id)),
            digests: Mutex::default(),
        })
    }

    /// The controller's end of the switch's CPU port, if it has one.
    pub fn cpu_port(&self) -> Option<&CpuPort> {
        self.cpu.as_ref()
    }

    /// The PacketIn of a frame the switch sent to its CPU port (None: shorter than its header).
    pub fn packet_in(&self, frame: &[u8]) -> Option<p4rt::PacketIn> {
        self.packet_in.packet_in(frame)
    }

    /// Puts a PacketOut's frame on the switch's CPU port.
    pub fn packet_out(&self, out: &p4rt::PacketOut) -> Result<(), UpdateError> {
        let cpu = self.cpu.as_ref().ok_or_else(|| UpdateError {
            code: Code::FailedPrecondition,
            message: format!(
                "switch {} has no CPU port: give its scenario `p4: {{ cpu_port: N }}` (simple_switch_grpc's --cpu-port)",
                self.name
            ),
        })?;
        let frame = self.packet_out.packet_out(out)?;
        if frame.len() > cpu.max_frame {
            return Err(UpdateError::invalid(format!(
                "a {}-byte frame is longer than the switch takes ({} bytes)",
                frame.len(),
                cpu.max_frame
            )));
        }
        match cpu.socket.send(&frame) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(UpdateError {
                code: Code::ResourceExhausted,
                message: "the CPU port's queue is full: PacketOut dropped".into(),
            }),
            Err(e) => Err(UpdateError {
                code: Code::Unavailable,
                message: format!("the CPU port: {e}"),
            }),
        }
    }

    /// The P4Info of the program the switch runs.
    pub fn p4info(&self) -> &p4i::P4Info {
        &self.info
    }

    fn program(&self) -> &ir::Program {
        self.datapath.program()
    }

    /// SetForwardingPipelineConfig: the switch keeps running its program, so a config is taken
    /// when its P4Info describes that program (whatever its device config: a BMv2 JSON from
    /// p4c is not read); committing one resets the tables to the program's initial state.
    pub fn set_pipeline(&self, action: i32, config: Option<p4rt::ForwardingPipelineConfig>) -> Result<(), UpdateError> {
        use p4rt::set_forwarding_pipeline_config_request::Action;
        let action = Action::try_from(action).unwrap_or(Action::Unspecified);
        let commit_only = action == Action::Commit;
        let config = match (config, commit_only) {
            (Some(c), _) => c,
            (None, true) => p4rt::ForwardingPipelineConfig::default(),
            (None, false) => return Err(UpdateError::invalid("no config given")),
        };
        if !commit_only {
            let sent = config
                .p4info
                .as_ref()
                .ok_or_else(|| UpdateError::invalid("the config has no P4Info"))?;
            same_objects(sent, &self.info).map_err(|why| UpdateError {
                code: Code::Unimplemented,
                message: format!(
                    "switch {} runs another program than this P4Info describes ({why}); intlab's switches keep the program \
                     their scenario gives them",
                    self.name
                ),
            })?;
        }
        match action {
            Action::Verify => Ok(()),
            Action::VerifyAndSave => {
                self.save(config);
                Ok(())
            }
            Action::VerifyAndCommit | Action::Commit => {
                if !commit_only {
                    self.save(config);
                }
                let program = self.program();
                self.datapath.edit(|cp| -> Result<(), UpdateError> {
                    let queues = std::mem::take(&mut cp.queues);
                    *cp = intlab_p4::exec::control_plane::ControlPlane::of(program);
                    cp.queues = queues;
                    Ok(())
                })
            }
            Action::ReconcileAndCommit => {
                self.save(config);
                Ok(())
            }
            Action::Unspecified => Err(UpdateError::invalid("no action given")),
        }
    }

    fn save(&self, config: p4rt::ForwardingPipelineConfig) {
        let mut p = self.pipeline.lock().unwrap_or_else(PoisonError::into_inner);
        *p = Pipeline {
            p4info: config.p4info,
            device_config: config.p4_device_config,
            cookie: config.cookie.map(|c| c.cookie),
        };
    }

    /// GetForwardingPipelineConfig: the P4Info of the running program (the one sent, if a
    /// client set it), the device config sent, the cookie.
    pub fn pipeline(&self, response_type: i32) -> p4rt::ForwardingPipelineConfig {
        use p4rt::get_forwarding_pipeline_config_request::ResponseType;
        let p = self.pipeline.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let rt = ResponseType::try_from(response_type).unwrap_or(ResponseType::All);
        let cookie = p
            .cookie
            .map(|cookie| p4rt::forwarding_pipeline_config::Cookie { cookie });
        let with_info = matches!(rt, ResponseType::All | ResponseType::P4infoAndCookie);
        let with_config = matches!(rt, ResponseType::All | ResponseType::DeviceConfigAndCookie);
        p4rt::ForwardingPipelineConfig {
            p4info: with_info.then(|| p.p4info.unwrap_or_else(|| self.info.clone())),
            p4_device_config: if with_config {
                p.device_config
            } else {
                prost::bytes::Bytes::new()
            },
            cookie,
        }
    }

    /// Applies `updates` in order, in one edit that frames see whole (one copy of the tables
    /// per Write, however many updates it has). A failed update changes nothing; with
    /// `all_or_none` (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC) one failure drops them all.
    /// Register cells and digest configurations, which live outside the tables, are written
    /// once the edit is kept.
    pub fn write(&self, updates: &[p4rt::Update], all_or_none: bool) -> Vec<Result<(), UpdateError>> {
        let mut results = Vec::with_capacity(updates.len());
        let mut after = Vec::new();
        let kept = self.datapath.edit(|cp| {
            for u in updates {
                results.push(self.update(cp, u, &mut after));
            }
            if all_or_none && results.iter().any(Result::is_err) {
                Err(())
            } else {
                Ok(())
            }
        });
        match kept {
            Ok(()) => {
                let mut digests = self.digests.lock().unwrap_or_else(PoisonError::into_inner);
                for change in after {
                    match change {
                        AfterEdit::Cell(reg, cell, v) => {
                            self.datapath.register_write(reg, cell, v);
                        }
                        AfterEdit::Digest(d, config) => digests.set(d, config),
                        AfterEdit::Meter(MeterTarget::Cell(m, i), rates) => {
                            if let Some(cell) = self.datapath.meter_cell(m, i) {
                                meters::set(cell, &rates);
                            }
                        }
                        AfterEdit::Meter(MeterTarget::Entry(state), rates) => meters::set(&state.meter, &rates),
                        AfterEdit::Counter(c, cell, packets, bytes) => {
                            // In range: checked when the update was read.
                            self.datapath.counter_write(c, cell, packets, bytes);
                        }
                        AfterEdit::DirectCounter(state, packets, bytes) => {
                            state
                                .counter
                                .packets
                                .store(packets, std::sync::atomic::Ordering::Relaxed);
                            state.counter.bytes.store(bytes, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            }
            Err(()) => {
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(UpdateError {
                        code: Code::Aborted,
                        message: "not applied: another update of the batch failed".into(),
                    });
                }
            }
        }
        results
    }

    /// One update applied to `cp`; what it changes outside the tables is added to `after`.
    fn update(
        &self,
        cp: &mut intlab_p4::exec::control_plane::ControlPlane,
        u: &p4rt::Update,
        after: &mut Vec<AfterEdit>,
    ) -> Result<(), UpdateError> {
        use p4rt::update::Type;
        let kind = Type::try_from(u.r#type).unwrap_or(Type::Unspecified);
        if kind == Type::Unspecified {
            return Err(UpdateError::invalid("update of no type"));
        }
        match u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
            Some(Entity::TableEntry(e)) => self.table_update(cp, kind, e),
            Some(Entity::RegisterEntry(r)) => {
                if kind != Type::Modify {
                    return Err(UpdateError::invalid("registers are only modified"));
                }
                let cells = self.register_cells(r)?;
                after.extend(cells.into_iter().map(|(reg, c, v)| AfterEdit::Cell(reg, c, v)));
                Ok(())
            }
            Some(Entity::DigestEntry(d)) => {
                after.push(self.digest_update(kind, d, after)?);
                Ok(())
            }
            Some(Entity::PacketReplicationEngineEntry(p)) => replication::update(cp, kind, p),
            Some(Entity::ValueSetEntry(v)) => value_sets::update(cp, &self.ids, self.program(), kind, v),
            Some(Entity::ActionProfileMember(m)) => profiles::member_update(cp, &self.ids, self.program(), kind, m),
            Some(Entity::ActionProfileGroup(g)) => profiles::group_update(cp, &self.ids, self.program(), kind, g),
            Some(Entity::MeterEntry(m)) => {
                if kind != Type::Modify {
                    return Err(UpdateError::invalid("meters are only modified"));
                }
                let rates = meters::rates(m.config.as_ref())?;
                let meter = self.indexed_meter(m.meter_id)?;
                for cell in self.meter_cells(meter, m.index.as_ref())? {
                    after.push(AfterEdit::Meter(MeterTarget::Cell(meter, cell), rates.clone()));
                }
                Ok(())
            }
            Some(Entity::DirectMeterEntry(d)) => {
                if kind != Type::Modify {
                    return Err(UpdateError::invalid("direct meters are only modified"));
                }
                let rates = meters::rates(d.config.as_ref())?;
                let state = self
                    .direct_entry(cp, d.table_entry.as_ref(), "meter", |t| t.direct_meter.is_some())?
                    .state
                    .clone();
                after.push(AfterEdit::Meter(MeterTarget::Entry(state), rates));
                Ok(())
            }
            Some(Entity::CounterEntry(c)) => {
                if kind != Type::Modify {
                    return Err(UpdateError::invalid("counters are only modified"));
                }
                let counter = self
                    .ids
                    .counter(c.counter_id)
                    .ok_or_else(|| UpdateError::not_found(format!("no counter has id {}", c.counter_id)))?;
                let def = &self.program().counters[counter];
                let (packets, bytes) = counts(c.data.as_ref())?;
                let cells: Vec<usize> = match &c.index {
                    Some(x) => vec![cell(x.index, def.size, &def.name)?],
                    None => (0..def.size).collect(),
                };
                after.extend(
                    cells
                        .into_iter()
                        .map(|n| AfterEdit::Counter(counter, n, packets, bytes)),
                );
                Ok(())
            }
            Some(Entity::DirectCounterEntry(d)) => {
                if kind != Type::Modify {
                    return Err(UpdateError::invalid("direct counters are only modified"));
                }
                let state = self
                    .direct_entry(cp, d.table_entry.as_ref(), "counter", |t| t.direct_counter.is_some())?
                    .state
                    .clone();
                let (packets, bytes) = counts(d.data.as_ref())?;
                after.push(AfterEdit::DirectCounter(state, packets, bytes));
                Ok(())
            }
            Some(_) => Err(UpdateError::unimplemented(
                "writing this entity over P4Runtime is not served yet",
            )),
            None => Err(UpdateError::invalid("update without an entity")),
        }
    }

    /// The indexed meter with id `id`.
    fn indexed_meter(&self, id: u32) -> Result<usize, UpdateError> {
        self.ids
            .meter(id)
            .filter(|&m| self.program().meters[m].table.is_none())
            .ok_or_else(|| UpdateError::not_found(format!("no indexed meter has id {id}")))
    }

    /// The cells of indexed meter `m` a MeterEntry's `index` names (none: all of them).
    fn meter_cells(&self, m: usize, index: Option<&p4rt::Index>) -> Result<Vec<usize>, UpdateError> {
        let def = &self.program().meters[m];
        Ok(match index {
            Some(i) => vec![cell(i.index, def.size, &def.name)?],
            None => (0..def.size).collect(),
        })
    }

    /// The stored entry the table entry `e` of a direct `what` names, in `cp`; refused when its
    /// table has none (`has` says whether it does).
    fn direct_entry<'c>(
        &self,
        cp: &'c intlab_p4::exec::control_plane::ControlPlane,
        e: Option<&p4rt::TableEntry>,
        what: &str,
        has: impl Fn(&intlab_p4::ir::Table) -> bool,
    ) -> Result<&'c intlab_p4::exec::table::StoredEntry, UpdateError> {
        let e = e.ok_or_else(|| UpdateError::invalid(format!("a direct {what} entry names its table entry")))?;
        let t = self.table(e.table_id)?;
        let program = self.program();
        if !has(&program.tables[t]) {
            return Err(UpdateError::invalid(format!(
                "table `{}` has no direct {what}",
                program.tables[t].name
            )));
        }
        let (entry, _) = entries::from_p4rt(&self.ids, program, t, e)?;
        cp.tables[t]
            .find(&entry.matches, entry.priority)
            .and_then(|at| cp.tables[t].stored(at))
            .map(|s| &**s)
            .ok_or_else(|| UpdateError::not_found("no entry with this match and priority"))
    }

    fn table(&self, id: u32) -> Result<usize, UpdateError> {
        self.ids
            .table(id)
            .ok_or_else(|| UpdateError::not_found(format!("no table has id {id}")))
    }

    fn table_update(
        &self,
        cp: &mut intlab_p4::exec::control_plane::ControlPlane,
        kind: p4rt::update::Type,
        e: &p4rt::TableEntry,
    ) -> Result<(), UpdateError> {
        use p4rt::update::Type;
        let t = self.table(e.table_id)?;
        let program = self.program();
        if e.is_default_action {
            if !e.r#match.is_empty() || e.priority != 0 {
                return Err(UpdateError::invalid("a default entry has no match and no priority"));
            }
            self.datapath.check_default_allowed(t).map_err(|m| UpdateError {
                code: Code::PermissionDenied,
                message: m,
            })?;
            cp.tables[t].default = match kind {
                Type::Modify => match e.action.as_ref() {
                    Some(a) => entries::action_call(&self.ids, program, t, a, true)?,
                    // P4Runtime 9.1.4: a MODIFY without an action resets the program's default.
                    None => program.tables[t].default_action.clone(),
                },
                // Deleting the default restores the program's.
                Type::Delete => program.tables[t].default_action.clone(),
                _ => return Err(UpdateError::invalid("the default entry is only modified or deleted")),
            };
            return Ok(());
        }
        self.datapath.check_entries_allowed(t).map_err(|m| UpdateError {
            code: Code::PermissionDenied,
            message: m,
        })?;
        let (entry, via) = entries::from_p4rt(&self.ids, program, t, e)?;
        if let Some(p) = program.tables[t].profile {
            profiles::check_runs(&cp.profiles[p], via)?;
        }
        let timeout = u64::try_from(e.idle_timeout_ns)
            .map_err(|_| UpdateError::invalid(format!("a negative idle timeout: {} ns", e.idle_timeout_ns)))?;
        if timeout > 0 && !program.tables[t].idle_timeout {
            return Err(UpdateError::invalid(format!(
                "table `{}` has no idle timeouts (support_timeout = true)",
                program.tables[t].name
            )));
        }
        let table = &mut cp.tables[t];
        // An insert finds a taken key itself: looking it up first would cost a second probe.
        let at = || {
            table
                .find(&entry.matches, entry.priority)
                .ok_or_else(|| UpdateError::not_found("no entry with this match and priority"))
        };
        match kind {
            Type::Insert => {
                if entry.action == usize::MAX {
                    return Err(UpdateError::invalid("an entry needs an action"));
                }
                let h = table.insert(entry, via).map_err(|e| match e {
                    InsertError::Taken => UpdateError::exists("an entry with this match and priority exists"),
                    InsertError::Full(_) => UpdateError {
                        code: Code::ResourceExhausted,
                        message: e.to_string(),
                    },
                    InsertError::Misfit(m) => UpdateError::invalid(m),
                })?;
                if let Some(at) = table.position(h) {
                    table.set_idle_timeout(at, timeout, now_ns());
                }
                Ok(())
            }
            Type::Modify => {
                if entry.action == usize::MAX {
                    return Err(UpdateError::invalid("an entry needs an action"));
                }
                let at = at()?;
                table.modify(at, entry.action, entry.args, via);
                table.set_idle_timeout(at, timeout, now_ns());
                Ok(())
            }
            Type::Delete => {
                let at = at()?;
                table.delete(at);
                Ok(())
            }
            Type::Unspecified => Err(UpdateError::invalid("update of no type")),
        }
    }

    /// A digest's configuration inserted, modified or deleted (as of the updates before it in
    /// the same Write).
    fn digest_update(
        &self,
        kind: p4rt::update::Type,
        d: &p4rt::DigestEntry,
        before: &[AfterEdit],
    ) -> Result<AfterEdit, UpdateError> {
        use p4rt::update::Type;
        let index = self
            .ids
            .digest(d.digest_id)
            .ok_or_else(|| UpdateError::not_found(format!("no digest has id {}", d.digest_id)))?;
        let set_now = before.iter().rev().find_map(|a| match a {
            AfterEdit::Digest(i, c) if *i == index => Some(c.is_some()),
            _ => None,
        });
        let exists = set_now.unwrap_or_else(|| {
            self.digests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(index)
        });
        match kind {
            Type::Insert if exists => Err(UpdateError::exists(format!("digest {} is configured", d.digest_id))),
            Type::Modify | Type::Delete if !exists => Err(UpdateError::not_found(format!(
                "digest {} is not configured",
                d.digest_id
            ))),
            Type::Delete => Ok(AfterEdit::Digest(index, None)),
            _ => {
                let config = d
                    .config
                    .ok_or_else(|| UpdateError::invalid("a digest entry needs its config"))?;
                if config.max_list_size < 0 || config.max_timeout_ns < 0 || config.ack_timeout_ns < 0 {
                    return Err(UpdateError::invalid(format!("a negative digest config: {config:?}")));
                }
                Ok(AfterEdit::Digest(index, Some(config)))
            }
        }
    }

    /// The digest lists due at `now_ns` (ns since the epoch), for the primary controller (see
    /// [`Digests::lists`]).
    pub fn digest_lists(&self, now_ns: i64) -> Vec<p4rt::DigestList> {
        let mut digests = self.digests.lock().unwrap_or_else(PoisonError::into_inner);
        // Until a controller asks for digests they stay for `intlab p4 cli` to read.
        if digests.is_empty() {
            return Vec::new();
        }
        let (messages, _dropped) = self.datapath.take_digests();
        digests.lists(messages, now_ns, |d| self.ids.digest_id(d))
    }

    /// The primary acknowledged a digest list.
    pub fn digest_ack(&self, ack: &p4rt::DigestListAck) {
        if let Some(d) = self.ids.digest(ack.digest_id) {
            self.digests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ack(d, ack.list_id);
        }
    }

    /// The entries that went unhit for their idle timeout since they were hit or last
    /// reported (at lab time `now_ns`), in P4Runtime's form. Reporting one restarts its timer,
    /// as the specification asks: an entry that stays idle is reported again every timeout.
    pub fn idle_entries(&self, now_ns: u64) -> Vec<p4rt::TableEntry> {
        let cp = self.datapath.control();
        let program = self.program();
        let mut reported = self.idle_reported.lock().unwrap_or_else(PoisonError::into_inner);
        let mut still = BTreeMap::new();
        let mut idle = Vec::new();
        for (t, table) in program.tables.iter().enumerate() {
            if !table.idle_timeout {
                continue;
            }
            for stored in cp.tables[t].entries() {
                if stored.idle_timeout_ns == 0 {
                    continue;
                }
                let key = (t, stored.handle);
                let last_hit = stored.state.last_hit.load(std::sync::atomic::Ordering::Relaxed);
                let last_report = reported.get(&key).copied();
                let since = last_hit.max(last_report.unwrap_or(0));
                if now_ns.saturating_sub(since) >= stored.idle_timeout_ns {
                    let mut te = entries::to_p4rt(&self.ids, program, t, stored);
                    te.idle_timeout_ns = stored.idle_timeout_ns as i64;
                    idle.push(te);
                    still.insert(key, now_ns);
                } else if let Some(r) = last_report {
                    still.insert(key, r);
                }
            }
        }
        // Entries deleted since are forgotten.
        *reported = still;
        idle
    }

    /// The cells a register update writes: (register, cell, value).
    fn register_cells(&self, r: &p4rt::RegisterEntry) -> Result<Vec<(usize, usize, u128)>, UpdateError> {
        let reg = self
            .ids
            .register(r.register_id)
            .ok_or_else(|| UpdateError::not_found(format!("no register has id {}", r.register_id)))?;
        let def = &self.program().registers[reg];
        let v = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
            Some(p4rt::p4_data::Data::Bitstring(b)) => value(b, def.width, &format!("register {}", def.name))?,
            _ => return Err(UpdateError::invalid("a register's data is a bitstring")),
        };
        Ok(match &r.index {
            Some(i) => vec![(reg, cell(i.index, def.size, &def.name)?, v)],
            None => (0..def.size).map(|c| (reg, c, v)).collect(),
        })
    }

    /// The entities `wanted` names, a zero id (or no index) standing for all of its kind.
    pub fn read(&self, wanted: &[p4rt::Entity]) -> Result<Vec<p4rt::Entity>, UpdateError> {
        let mut out = Vec::new();
        let cp = self.datapath.control();
        let program = self.program();
        for w in wanted {
            match &w.entity {
                Some(Entity::TableEntry(e)) => self.read_table_entries(&cp, e, &mut out)?,
                Some(Entity::RegisterEntry(r)) => self.read_registers(r, &mut out)?,
                Some(Entity::ValueSetEntry(v)) => out.extend(value_sets::read(&cp, &self.ids, program, v)?),
                Some(Entity::ActionProfileMember(m)) => out.extend(profiles::read_members(&cp, &self.ids, program, m)?),
                Some(Entity::ActionProfileGroup(g)) => out.extend(profiles::read_groups(&cp, &self.ids, program, g)?),
                Some(Entity::MeterEntry(m)) => self.read_meters(m, &mut out)?,
                Some(Entity::DirectMeterEntry(d)) => self.read_direct_meters(&cp, d, &mut out)?,
                Some(Entity::CounterEntry(c)) => self.read_counters(c, &mut out)?,
                Some(Entity::PacketReplicationEngineEntry(p)) => out.extend(replication::read(&cp, p)),
                Some(_) => {
                    return Err(UpdateError::unimplemented(
                        "reading this entity over P4Runtime is not served yet",
                    ));
                }
                None => return Err(UpdateError::invalid("an entity to read names its kind")),
            }
        }
        Ok(out)
    }

    /// The table entries `e` asks for (every table's when its table id is 0), or the default actions.
    fn read_table_entries(
        &self,
        cp: &intlab_p4::exec::control_plane::ControlPlane,
        e: &p4rt::TableEntry,
        out: &mut Vec<p4rt::Entity>,
    ) -> Result<(), UpdateError> {
        let program = self.program();
        let tables: Vec<usize> = if e.table_id == 0 {
            self.ids.tables().collect()
        } else {
            vec![self.table(e.table_id)?]
        };
        for t in tables {
            if e.is_default_action {
                let (a, args) = &cp.tables[t].default;
                out.push(table_entity(p4rt::TableEntry {
                    table_id: self.ids.table_id(t),
                    action: Some(entries::action_of(&self.ids, program, *a, args)),
                    is_default_action: true,
                    ..Default::default()
                }));
                continue;
            }
            let filter = if e.r#match.is_empty() {
                None
            } else {
                Some(entries::from_p4rt(&self.ids, program, t, e)?.0)
            };
            for stored in cp.tables[t].entries() {
                if filter
                    .as_ref()
                    .is_some_and(|f| f.matches != stored.entry.matches || f.priority != stored.entry.priority)
                {
                    continue;
                }
                let mut te = entries::to_p4rt(&self.ids, program, t, stored);
                te.idle_timeout_ns = stored.idle_timeout_ns as i64;
                if e.time_since_last_hit.is_some() && program.tables[t].idle_timeout {
                    let last = stored.state.last_hit.load(std::sync::atomic::Ordering::Relaxed);
                    te.time_since_last_hit = Some(p4rt::table_entry::IdleTimeout {
                        elapsed_ns: now_ns().saturating_sub(last) as i64,
                    });
                }
                if e.counter_data.is_some() && program.tables[t].direct_counter.is_some() {
                    te.counter_data = Some(counter_data(
                        stored.state.counter.packets.load(std::sync::atomic::Ordering::Relaxed),
                        stored.state.counter.bytes.load(std::sync::atomic::Ordering::Relaxed),
                    ));
                }
                out.push(table_entity(te));
            }
        }
        Ok(())
    }

    /// The register cells `r` asks for.
    fn read_registers(&self, r: &p4rt::RegisterEntry, out: &mut Vec<p4rt::Entity>) -> Result<(), UpdateError> {
        let program = self.program();
        let regs: Vec<usize> = if r.register_id == 0 {
            (0..program.registers.len()).collect()
        } else {
            vec![
                self.ids
                    .register(r.register_id)
                    .ok_or_else(|| UpdateError::not_found(format!("no register has id {}", r.register_id)))?,
            ]
        };
        for reg in regs {
            let def = &program.registers[reg];
            let cells: Vec<usize> = match &r.index {
                Some(i) => vec![cell(i.index, def.size, &def.name)?],
                None => (0..def.size).collect(),
            };
            for c in cells {
                let v = self.datapath.register_read(reg, c).unwrap_or(0);
                out.push(p4rt::Entity {
                    entity: Some(Entity::RegisterEntry(p4rt::RegisterEntry {
                        register_id: self.ids.register_id(reg),
                        index: Some(p4rt::Index { index: c as i64 }),
                        data: Some(p4rt::P4Data {
                            data: Some(p4rt::p4_data::Data::Bitstring(canonical(v))),
                        }),
                    })),
                });
            }
        }
        Ok(())
    }

    /// The indexed meters' cells `m` asks for.
    fn read_meters(&self, m: &p4rt::MeterEntry, out: &mut Vec<p4rt::Entity>) -> Result<(), UpdateError> {
        let program = self.program();
        let meters: Vec<usize> = if m.meter_id == 0 {
            (0..program.meters.len())
                .filter(|&i| program.meters[i].table.is_none())
                .collect()
        } else {
            vec![self.indexed_meter(m.meter_id)?]
        };
        for meter in meters {
            let id = self.ids.meter_id(meter);
            for c in self.meter_cells(meter, m.index.as_ref())? {
                let config = self.datapath.meter_cell(meter, c).and_then(meters::config);
                out.push(p4rt::Entity {
                    entity: Some(Entity::MeterEntry(p4rt::MeterEntry {
                        meter_id: id,
                        index: Some(p4rt::Index { index: c as i64 }),
                        config,
                        ..Default::default()
                    })),
                });
            }
        }
        Ok(())
    }

    /// The direct meters of the entries `d` asks for.
    fn read_direct_meters(
        &self,
        cp: &intlab_p4::exec::control_plane::ControlPlane,
        d: &p4rt::DirectMeterEntry,
        out: &mut Vec<p4rt::Entity>,
    ) -> Result<(), UpdateError> {
        let program = self.program();
        let wanted = d.table_entry.clone().unwrap_or_default();
        let tables: Vec<usize> = if wanted.table_id == 0 {
            self.ids
                .tables()
                .filter(|&t| program.tables[t].direct_meter.is_some())
                .collect()
        } else {
            vec![self.table(wanted.table_id)?]
        };
        for t in tables {
            for stored in cp.tables[t].entries() {
                let mut te = entries::to_p4rt(&self.ids, program, t, stored);
                if !wanted.r#match.is_empty() && (te.r#match != wanted.r#match || te.priority != wanted.priority) {
                    continue;
                }
                te.action = None;
                out.push(p4rt::Entity {
                    entity: Some(Entity::DirectMeterEntry(p4rt::DirectMeterEntry {
                        table_entry: Some(te),
                        config: meters::config(&stored.state.meter),
                        ..Default::default()
                    })),
                });
            }
        }
        Ok(())
    }

    /// The indexed counters' cells `c` asks for.
    fn read_counters(&self, c: &p4rt::CounterEntry, out: &mut Vec<p4rt::Entity>) -> Result<(), UpdateError> {
        let program = self.program();
        let counters: Vec<usize> = if c.counter_id == 0 {
            (0..program.counters.len())
                .filter(|&i| program.counters[i].table.is_none())
                .collect()
        } else {
            vec![
                self.ids
                    .counter(c.counter_id)
                    .ok_or_else(|| UpdateError::not_found(format!("no counter has id {}", c.counter_id)))?,
            ]
        };
        for i in counters {
            let def = &program.counters[i];
            let cells: Vec<usize> = match &c.index {
                Some(x) => vec![cell(x.index, def.size, &def.name)?],
                None => (0..def.size).collect(),
            };
            for n in cells {
                let (packets, bytes) = self.datapath.counter_read(i, n).unwrap_or((0, 0));
                out.push(p4rt::Entity {
                    entity: Some(Entity::CounterEntry(p4rt::CounterEntry {
                        counter_id: self.ids.counter_id(i),
                        index: Some(p4rt::Index { index: n as i64 }),
                        data: Some(counter_data(packets, bytes)),
                    })),
                });
            }
        }
        Ok(())
    }
}

fn table_entity(e: p4rt::TableEntry) -> p4rt::Entity {
    p4rt::Entity {
        entity: Some(Entity::TableEntry(e)),
    }
}

/// The packets and bytes a counter write sets (none given: 0, as a reset writes them).
fn counts(d: Option<&p4rt::CounterData>) -> Result<(u64, u64), UpdateError> {
    let Some(d) = d else { return Ok((0, 0)) };
    match (u64::try_from(d.packet_count), u64::try_from(d.byte_count)) {
        (Ok(p), Ok(b)) => Ok((p, b)),
        _ => Err(UpdateError::invalid(format!(
            "counter data of {} packets and {} bytes: counts are not negative",
            d.packet_count, d.byte_count
        ))),
    }
}

fn counter_data(packets: u64, bytes: u64) -> p4rt::CounterData {
    p4rt::CounterData {
        byte_count: bytes as i64,
        packet_count: packets as i64,
    }
}

/// A P4Info object with a preamble.
trait HasPreamble {
    fn preamble(&self) -> Option<&p4i::Preamble>;
}

macro_rules! has_preamble {
    ($($t:ty),*) => {$(
        impl HasPreamble for $t {
            fn preamble(&self) -> Option<&p4i::Preamble> {
                self.preamble.as_ref()
            }
        }
    )*};
}
has_preamble!(
    p4i::Table,
    p4i::Action,
    p4i::Register,
    p4i::Counter,
    p4i::DirectCounter,
    p4i::Meter,
    p4i::DirectMeter,
    p4i::ActionProfile,
    p4i::ValueSet,
    p4i::Digest,
    p4i::ControllerPacketMetadata
);

/// Cell `index` of an array of `size` named `name`.
fn cell(index: i64, size: usize, name: &str) -> Result<usize, UpdateError> {
    usize::try_from(index)
        .ok()
        .filter(|&i| i < size)
        .ok_or_else(|| UpdateError {
            code: Code::OutOfRange,
            message: format!("{name} has {size} cells; index {index}"),
        })
}

/// Whether `a` and `b` describe the same objects: ids and names of every object, and the
/// ids, names and widths of tables' match fields and actions' parameters.
fn same_objects(a: &p4i::P4Info, b: &p4i::P4Info) -> Result<(), String> {
    fn names<T: HasPreamble>(v: &[T]) -> Vec<(u32, String)> {
        let mut out: Vec<(u32, String)> = v
            .iter()
            .filter_map(HasPreamble::preamble)
            .map(|p| (p.id, p.name.clone()))
            .collect();
        out.sort();
        out
    }
    let pairs = [
        ("tables", names(&a.tables), names(&b.tables)),
        ("actions", names(&a.actions), names(&b.actions)),
        ("registers", names(&a.registers), names(&b.registers)),
        ("counters", names(&a.counters), names(&b.counters)),
        ("direct counters", names(&a.direct_counters), names(&b.direct_counters)),
        ("meters", names(&a.meters), names(&b.meters)),
        ("direct meters", names(&a.direct_meters), names(&b.direct_meters)),
        ("action profiles", names(&a.action_profiles), names(&b.action_profiles)),
        ("value sets", names(&a.value_sets), names(&b.value_sets)),
        ("digests", names(&a.digests), names(&b.digests)),
        (
            "controller headers",
            names(&a.controller_packet_metadata),
            names(&b.controller_packet_metadata),
        ),
    ];
    for (what, x, y) in pairs {
        if x != y {
            let only: Vec<&String> = x.iter().filter(|o| !y.contains(o)).map(|o| &o.1).collect();
            let missing: Vec<&String> = y.iter().filter(|o| !x.contains(o)).map(|o| &o.1).collect();
            return Err(format!(
                "{what}: the P4Info has {only:?} that the program has not, and lacks {missing:?}"
            ));
        }
    }
    for t in &a.tables {
        let Some(other) = b
            .tables
            .iter()
            .find(|o| o.preamble.as_ref().map(|p| p.id) == t.preamble.as_ref().map(|p| p.id))
        else {
            continue;
        };
        let fields = |x: &p4i::Table| -> Vec<(u32, String, i32)> {
            x.match_fields
                .iter()
                .map(|m| (m.id, m.name.clone(), m.bitwidth))
                .collect()
        };
        if fields(t) != fields(other) {
            let name = t.preamble.as_ref().map_or("?", |p| p.name.as_str());
            return Err(format!(
                "table {name}: match fields {:?}, the program's {:?}",
                fields(t),
                fields(other)
            ));
        }
    }
    for act in &a.actions {
        let id = act.preamble.as_ref().map(|p| p.id);
        let Some(other) = b.actions.iter().find(|o| o.preamble.as_ref().map(|p| p.id) == id) else {
            continue;
        };
        let params = |x: &p4i::Action| -> Vec<(u32, String, i32)> {
            x.params.iter().map(|m| (m.id, m.name.clone(), m.bitwidth)).collect()
        };
        if params(act) != params(other) {
            let name = act.preamble.as_ref().map_or("?", |p| p.name.as_str());
            return Err(format!(
                "action {name}: parameters {:?}, the program's {:?}",
                params(act),
                params(other)
            ));
        }
    }
    Ok(())
}

/// Now on the lab clock, on which frames are stamped (and entries hit).
fn now_ns() -> u64 {
    intlab_runtime::clock::Clock::get().now_ns()
}
