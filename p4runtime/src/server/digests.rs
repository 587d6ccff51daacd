//! Digest lists for the primary controller: the messages of each configured digest, held
//! until its previous list is acknowledged (or its `ack_timeout_ns` has passed), then sent at
//! most `max_list_size` to a list, as the specification's DigestEntry asks.

use std::collections::{BTreeMap, VecDeque};

use intlab_p4::exec::DigestMessage;

use super::entries::canonical;
use crate::proto::p4::v1 as p4rt;

/// Messages held for one digest before the oldest are dropped.
const HELD: usize = 4096;

/// One configured digest.
#[derive(Debug)]
struct Configured {
    config: p4rt::digest_entry::Config,
    /// Messages not sent yet, oldest first.
    held: VecDeque<p4rt::P4Data>,
    /// The list sent last and not acknowledged yet, with when it was sent (ns since the epoch).
    unacked: Option<(u64, i64)>,
}

/// The digests controllers configured on one device.
#[derive(Debug, Default)]
pub struct Digests {
    configured: BTreeMap<usize, Configured>,
    last_list: u64,
}

impl Digests {
    /// Whether digest `d` is configured.
    pub fn contains(&self, d: usize) -> bool {
        self.configured.contains_key(&d)
    }

    /// Configures digest `d` (keeping what it holds); `None` removes it.
    pub fn set(&mut self, d: usize, config: Option<p4rt::digest_entry::Config>) {
        match config {
            None => {
                self.configured.remove(&d);
            }
            Some(config) => {
                let c = self.configured.entry(d).or_insert_with(|| Configured {
                    config,
                    held: VecDeque::new(),
                    unacked: None,
                });
                c.config = config;
            }
        }
    }

    /// Whether no digest is configured (the program's digests then stay for `intlab p4 cli`).
    pub fn is_empty(&self) -> bool {
        self.configured.is_empty()
    }

    /// A controller acknowledged list `list_id` of digest `d`.
    pub fn ack(&mut self, d: usize, list_id: u64) {
        if let Some(c) = self.configured.get_mut(&d)
            && c.unacked.is_some_and(|(id, _)| id == list_id)
        {
            c.unacked = None;
        }
    }

    /// Takes `messages` in and returns the lists due at `now_ns` (ns since the epoch), as
    /// (digest, list); a digest's list waits while the one before is unacknowledged and its
    /// ack timeout has not passed. Messages of digests nobody configured are dropped, as BMv2
    /// drops them once a controller takes digests.
    pub fn lists(
        &mut self,
        messages: Vec<DigestMessage>,
        now_ns: i64,
        id_of: impl Fn(usize) -> u32,
    ) -> Vec<p4rt::DigestList> {
        for m in messages {
            let Some(c) = self.configured.get_mut(&m.digest) else {
                continue;
            };
            let members = m
                .values
                .iter()
                .map(|&v| p4rt::P4Data {
                    data: Some(p4rt::p4_data::Data::Bitstring(canonical(v))),
                })
                .collect();
            if c.held.len() >= HELD {
                c.held.pop_front();
            }
            c.held.push_back(p4rt::P4Data {
                data: Some(p4rt::p4_data::Data::Struct(p4rt::P4StructLike { members })),
            });
        }
        let mut lists = Vec::new();
        for (&d, c) in &mut self.configured {
            let gated = c.config.ack_timeout_ns > 0;
            while !c.held.is_empty() {
                if gated
                    && c.unacked
                        .is_some_and(|(_, sent)| now_ns - sent < c.config.ack_timeout_ns)
                {
                    break;
                }
                let max = usize::try_from(c.config.max_list_size).unwrap_or(0);
                let n = if max == 0 { c.held.len() } else { max.min(c.held.len()) };
                self.last_list += 1;
                lists.push(p4rt::DigestList {
                    digest_id: id_of(d),
                    list_id: self.last_list,
                    data: c.held.drain(..n).collect(),
                    timestamp: now_ns,
                });
                if gated {
                    c.unacked = Some((self.last_list, now_ns));
                }
            }
        }
        lists
    }
}
