//! Meters over P4Runtime: a MeterConfig (rates in units per second, bursts in units) is a
//! cell's two rates as BMv2 keeps them (units per microsecond, committed first). Cells live
//! outside the tables, so a Write sets them once its edit of the tables is kept.

use std::sync::Arc;

use intlab_p4::exec::meter::MeterCell;

use super::error::UpdateError;
use crate::proto::p4::v1 as p4rt;

/// The cell a meter write sets.
pub enum MeterTarget {
    /// An indexed meter's cell: (meter, cell).
    Cell(usize, usize),
    /// A table entry's direct meter, in the state the entry shares with its copies.
    Entry(Arc<intlab_p4::exec::table::EntryState>),
}

/// The rates `config` gives (committed first); none, to forget them (every frame green).
pub fn rates(config: Option<&p4rt::MeterConfig>) -> Result<Vec<(f64, u64)>, UpdateError> {
    let Some(c) = config else { return Ok(Vec::new()) };
    let bad = [c.cir, c.cburst, c.pir, c.pburst].iter().any(|&v| v < 0);
    if bad || c.pir < c.cir {
        return Err(UpdateError::invalid(format!(
            "meter config {c:?}: rates and bursts are not negative, and the peak rate is not below the committed one"
        )));
    }
    Ok(vec![
        (c.cir as f64 / 1e6, c.cburst as u64),
        (c.pir as f64 / 1e6, c.pburst as u64),
    ])
}

/// A cell's rates as a MeterConfig; none when it has none.
pub fn config(cell: &MeterCell) -> Option<p4rt::MeterConfig> {
    let rates = cell.rates();
    let [(cir, cburst), (pir, pburst)] = rates.as_slice() else {
        return None;
    };
    Some(p4rt::MeterConfig {
        cir: (cir * 1e6).round() as i64,
        cburst: *cburst as i64,
        pir: (pir * 1e6).round() as i64,
        pburst: *pburst as i64,
        ..Default::default()
    })
}

/// Sets `cell` to `rates` (none: forgets them).
pub fn set(cell: &MeterCell, rates: &[(f64, u64)]) {
    if rates.is_empty() {
        cell.reset();
    } else if let Err(e) = cell.set_rates(rates) {
        // `rates` checked the order already.
        tracing::error!("meter rates {rates:?}: {e}");
    }
}
