//! The P4 port numbers of a switch's ports: the default a port gets by its name, and the checks
//! on a CPU port's number.

/// The P4 port number of port `index` named `name` when none is given: the number its name ends
/// with (`eth1` → 1, `s1-p3` → 3, as the p4lang tutorials number ports), else its position from 1.
pub fn default_p4_port(name: &str, index: usize) -> u16 {
    let digits: String = name.chars().rev().take_while(char::is_ascii_digit).collect();
    let digits: String = digits.chars().rev().collect();
    digits
        .parse::<u16>()
        .ok()
        .filter(|n| *n < intlab_p4::exec::DROP_PORT)
        .unwrap_or(index as u16 + 1)
}

/// Checks that `cpu` can be a switch's CPU port beside its ports' P4 numbers `taken`.
pub fn check_cpu_port(cpu: u16, taken: &[(&str, u16)]) -> Result<(), String> {
    if cpu >= intlab_p4::exec::DROP_PORT {
        return Err(format!("{cpu} is not below 511 (the drop port)"));
    }
    match taken.iter().find(|(_, n)| *n == cpu) {
        Some((name, _)) => Err(format!("P4 port {cpu} is already port `{name}`'s")),
        None => Ok(()),
    }
}
