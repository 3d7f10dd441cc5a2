//! The build without the `agents` feature (`--no-default-features`): no
//! `field` or `experiment` command, a clear word on how to get them back,
//! and panels as in the full build.

use crate::support::{scratch, sim, stderr};

#[test]
fn field_and_experiment_say_how_to_get_them_back_and_panels_run() {
    let dir = scratch("slim");
    for args in [&["field", "simulate"][..], &["experiment", "--topics", "1"], &["experiment", "--help"]] {
        let out = sim(&dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("without the `agents` feature") && err.contains("cargo install --locked --path sim-cli"),
            "{args:?}: {err}"
        );
    }
    assert!(std::fs::read_dir(&dir).expect("scratch").next().is_none(), "a refused command writes nothing");
    let help = String::from_utf8_lossy(&sim(&dir, &["--help"]).stdout).into_owned();
    assert!(help.contains("run") && !help.contains("experiment") && !help.contains("field"), "{help}");
    let run = sim(&dir, &["run", "--personas", "3", "--ticks", "2", "--out", "r", "--json"]);
    assert!(run.status.success(), "{}", stderr(&run));
}
