//! `cvm audit`: the fixtures checked against their recorded outcomes.

use crate::*;

pub(crate) fn audit(
    dir: Option<&Path>,
    engine: AuditEngineArg,
    schedule: Option<u32>,
    json: bool,
    cache: &CacheArgs,
) -> Result<(), Failure> {
    use cvm_cli::audit::{Engines, audit_case};
    use std::io::IsTerminal;

    // Every case would fail to load alike; say so once instead.
    if let Some(version) = schedule
        && let Err(error) = cvm_engine::schedule_by_version(version)
    {
        return Err(HostError::Usage(error.to_string()).into());
    }

    let root = dir.map_or_else(cvm_fixtures::root, Path::to_path_buf);
    if !root.is_dir() {
        return Err(HostError::Usage(format!(
            "{}: no such directory (audit reads fixture cases from a directory)",
            root.display()
        ))
        .into());
    }
    let cases = cvm_fixtures::cases_in(&root).map_err(|e| HostError::input(e.to_string()))?;
    if cases.is_empty() {
        return Err(HostError::Usage(format!("no fixture cases under {}", root.display())).into());
    }
    let engines = match engine {
        AuditEngineArg::Both => Engines::Both,
        AuditEngineArg::Native => Engines::Native,
        AuditEngineArg::Wasm => Engines::Wasm,
    };
    let wasm = match engines {
        Engines::Native => None,
        _ => Some(cache.engine()?),
    };
    let progress = std::io::stderr().is_terminal() && !json;
    let started = std::time::Instant::now();
    let mut rows = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        if progress {
            err!("\r\x1b[2K[{}/{}] {}", index + 1, cases.len(), case.name);
        }
        rows.push(audit_case(case, engines, wasm.as_ref(), schedule));
    }
    if progress {
        err!("\r\x1b[2K");
    }
    let failed = rows.iter().filter(|row| !row.passed()).count();
    let summary = format!(
        "audit: {} fixtures, {} pass, {failed} fail ({} {}{}; {:.1?})",
        rows.len(),
        rows.len() - failed,
        std::env::consts::ARCH,
        match engines {
            Engines::Both => "native and wasm",
            Engines::Native => "native",
            Engines::Wasm => "wasm",
        },
        schedule.map_or(String::new(), |version| format!(
            "; every fixture under gas schedule {version}"
        )),
        started.elapsed()
    );
    if json {
        let value = serde_json::json!({
            "fixtures": rows.iter().map(|row| row.to_json()).collect::<Vec<_>>(),
            "summary": {"total": rows.len(), "passed": rows.len() - failed, "failed": failed, "arch": std::env::consts::ARCH, "schedule": schedule},
        });
        outln!("{value}")?;
    } else {
        let width = rows
            .iter()
            .map(|row| row.name.len())
            .max()
            .unwrap_or(7)
            .max(7);
        let short = |result: &Option<Result<String, String>>| match result {
            None => String::from("-"),
            Some(Ok(hash)) => hash.chars().take(12).collect(),
            Some(Err(_)) => String::from("FAILED"),
        };
        outln!(
            "{:<width$}  {:<12}  {:<12}  {:<12}  {:>12}  {:>9}",
            "fixture",
            "native",
            "wasm",
            "golden",
            "gas",
            "time"
        )?;
        for row in &rows {
            outln!(
                "{:<width$}  {:<12}  {:<12}  {:<12}  {:>12}  {:>9.1?}{}",
                row.name,
                short(&row.native),
                short(&row.wasm),
                match (&row.golden, row.golden_applies()) {
                    (_, false) => format!("(blessed v{})", row.blessed_schedule),
                    (None, true) => String::from("(none)"),
                    (Some(golden), true) => golden.chars().take(12).collect(),
                },
                row.gas_used.map_or(String::from("-"), |g| g.to_string()),
                row.time,
                if row.passed() { "" } else { "  MISMATCH" }
            )?;
            for (engine, result) in [("native", &row.native), ("wasm", &row.wasm)] {
                if let Some(Err(message)) = result {
                    outln!("    {engine}: {message}")?;
                }
            }
        }
        outln!("{summary}")?;
    }
    if failed > 0 {
        Err(Failure::Deterministic)
    } else {
        Ok(())
    }
}
