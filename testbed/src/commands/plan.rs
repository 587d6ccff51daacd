//! `intlab plan`: a scenario spread over sites, printed as its `sites:` key.

use std::process::ExitCode;

use anyhow::{Result, bail};
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_lab::sites::TUNNEL_OVERHEAD;
use intlab_lab::sites::plan as site_plan;

/// `intlab plan`: the plan, the load of each site and the links that become tunnels, with the
/// MTU the machines' network must carry for them.
pub(crate) fn plan(file: Option<&std::path::Path>, sites: usize, set: Vec<String>) -> Result<ExitCode> {
    if sites == 0 {
        bail!("--sites 0: expected at least one site");
    }
    let overrides = Overrides {
        set,
        ..Overrides::default()
    };
    let s = Scenario::load_or_builtin(file, &overrides)?;
    let t = &s.topology;
    let switches = t.switches().count();
    if sites > switches {
        bail!(
            "--sites {sites}: {} has {switches} switch(es); a site holds at least one",
            t.name
        );
    }
    let planned: Vec<_> = s.flows().iter().map(|f| (f.src, f.dst, f.size)).collect();
    let p = site_plan::plan(t, &planned, s.transport.mtu, sites);
    print!("{}", p.yaml(t));
    let total: u64 = p.load.iter().sum::<u64>().max(1);
    println!("# planned packets per site (each counted at every node it crosses):");
    for (name, load) in p.names.iter().zip(&p.load) {
        println!("#   {name}: {load} ({:.1} %)", *load as f64 * 100.0 / total as f64);
    }
    let cut = p.cut_links(t);
    let frame = u64::from(s.transport.link_mtu()) + 14;
    println!(
        "# {} link(s) cross sites, each a VXLAN tunnel: the machines' network must carry {} B frames ({frame} + {TUNNEL_OVERHEAD}: VXLAN's headers and the lab-time stamp)",
        cut.len(),
        frame + u64::from(TUNNEL_OVERHEAD)
    );
    for li in cut {
        let props = &t.links[li].props;
        println!(
            "#   {}: {}, {} us",
            t.link_name(li),
            props.rate,
            props.delay.0 as f64 / 1000.0
        );
    }
    Ok(ExitCode::SUCCESS)
}
