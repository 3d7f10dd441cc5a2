//! The library's errors as the package's exceptions. The classes are
//! Python's own (`simengine/errors.py`, with their docstrings and typed
//! attributes); this module picks one per error and fills its fields.
//! Every exception carries the engine's message unchanged.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Which of the package's exceptions an error becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A configuration file or value, or an option.
    Config,
    /// A scenario.
    Scenario,
    /// A panel, its map, or survey data.
    Panel,
    /// A chat or embedding provider.
    Provider,
    /// Spend: a live run not confirmed for its estimate, a bad budget.
    Budget,
    /// Stopped at a tick boundary, resumable.
    Interrupted,
    /// Anything else (a file, a trace, a divergence).
    Base,
}

impl Kind {
    fn class(self) -> &'static str {
        match self {
            Kind::Config => "ConfigError",
            Kind::Scenario => "ScenarioError",
            Kind::Panel => "PanelError",
            Kind::Provider => "ProviderError",
            Kind::Budget => "BudgetError",
            Kind::Interrupted => "Interrupted",
            Kind::Base => "SimEngineError",
        }
    }
}

/// What the caller passed, for telling a scenario's errors from a
/// configuration's (both are files the engine parses).
#[derive(Debug, Default, Clone)]
pub struct Inputs {
    /// The scenario argument (a built-in name or a file).
    pub scenario: Option<String>,
}

fn kind_of_engine(e: &engine::Error, inputs: &Inputs) -> Kind {
    let names_scenario =
        |file: &str| inputs.scenario.as_deref().is_some_and(|s| file == s || file == format!("built-in scenario {s}"));
    match e {
        engine::Error::Config { .. } => Kind::Config,
        engine::Error::Fixture { source_name, .. } | engine::Error::Parse { source_name, .. }
            if names_scenario(source_name) =>
        {
            Kind::Scenario
        }
        engine::Error::Fixture { .. } | engine::Error::Parse { .. } => Kind::Config,
        engine::Error::Embedding { .. } | engine::Error::Chat { .. } => Kind::Provider,
        engine::Error::WrongCardinality { .. }
        | engine::Error::WrongDimension { .. }
        | engine::Error::Io { .. }
        | engine::Error::Format { .. }
        | engine::Error::Corrupt { .. }
        | engine::Error::Torn { .. }
        | engine::Error::Uncommitted { .. }
        | engine::Error::RecordedByOlder { .. }
        | engine::Error::UnknownTrait { .. }
        | engine::Error::CassetteMiss { .. } => Kind::Base,
    }
}

fn kind_of(e: &runs::Error, inputs: &Inputs) -> Kind {
    match e {
        runs::Error::Survey(_) => Kind::Panel,
        runs::Error::Engine(inner) => kind_of_engine(inner, inputs),
        runs::Error::Chat(_) | runs::Error::Embed(_) => Kind::Provider,
        runs::Error::Actors(actors::Error::Engine(inner)) => kind_of_engine(inner, inputs),
        runs::Error::NotConfirmed(_) => Kind::Budget,
        runs::Error::Input(m) if m.starts_with("--budget-usd") => Kind::Budget,
        runs::Error::Input(m) if m.starts_with("--scenario") || m.starts_with("scenario ") => Kind::Scenario,
        runs::Error::Input(m) if m.starts_with("--panel") => Kind::Panel,
        runs::Error::Input(_) => Kind::Config,
        runs::Error::Interrupted { .. } => Kind::Interrupted,
        runs::Error::Context { source, .. }
        | runs::Error::Stopped { source, .. }
        | runs::Error::MergeFailed { source, .. } => kind_of(source, inputs),
        runs::Error::Io { what, .. } if what.starts_with("cannot read config") => Kind::Config,
        runs::Error::Io { what, .. } if what.starts_with("cannot read scenario") => Kind::Scenario,
        runs::Error::Io { .. } | runs::Error::Refused(_) | runs::Error::Actors(_) | runs::Error::Diverged(_) => {
            Kind::Base
        }
    }
}

/// The structured fields of an error, where it has them.
fn fields<'py>(py: Python<'py>, e: &runs::Error) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match e {
        runs::Error::Survey(survey::Error::Row { file, row, column, cause: _ }) => {
            d.set_item("file", file)?;
            d.set_item("row", row)?;
            d.set_item("column", column)?;
        }
        runs::Error::Survey(survey::Error::Spec { file, field, cause: _ }) => {
            d.set_item("file", file)?;
            d.set_item("column", field)?;
        }
        runs::Error::Survey(survey::Error::Parse { file, cause: _ }) => d.set_item("file", file)?,
        runs::Error::Interrupted { dir, after_tick, reason, detail: _ } => {
            d.set_item("run_dir", dir.display().to_string())?;
            d.set_item("after_tick", after_tick)?;
            d.set_item("reason", reason)?;
        }
        runs::Error::Stopped { dir, .. } => d.set_item("run_dir", dir.display().to_string())?,
        runs::Error::Context { source, .. } | runs::Error::MergeFailed { source, .. } => return fields(py, source),
        runs::Error::Input(_)
        | runs::Error::Io { .. }
        | runs::Error::Refused(_)
        | runs::Error::NotConfirmed(_)
        | runs::Error::Engine(_)
        | runs::Error::Chat(_)
        | runs::Error::Embed(_)
        | runs::Error::Actors(_)
        | runs::Error::Diverged(_) => {}
    }
    Ok(d)
}

/// An exception of class `name` from `simengine.errors`, with `message`
/// and the attributes in `attrs`.
fn exception(py: Python<'_>, name: &str, message: &str, attrs: Option<&Bound<'_, PyDict>>) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = py.import("simengine.errors")?.getattr(name)?;
        let value = class.call1((message,))?;
        if let Some(attrs) = attrs {
            for (k, v) in attrs.iter() {
                value.setattr(k.extract::<String>()?.as_str(), v)?;
            }
        }
        Ok(PyErr::from_value(value))
    };
    build().unwrap_or_else(|e| e)
}

/// `e` as the package's exception.
pub fn to_py(py: Python<'_>, e: &runs::Error, inputs: &Inputs) -> PyErr {
    let attrs = fields(py, e).ok();
    exception(py, kind_of(e, inputs).class(), &e.to_string(), attrs.as_ref())
}

/// A bug of the engine's, as `simengine.SimEngineError` (never a panic
/// escaping into Python).
pub fn internal(py: Python<'_>, message: &str) -> PyErr {
    exception(py, Kind::Base.class(), message, None)
}

/// A caller's bad argument found by the binding itself, as
/// `simengine.ConfigError` or `PanelError`.
pub fn refused(py: Python<'_>, panel: bool, message: &str) -> PyErr {
    exception(py, if panel { Kind::Panel.class() } else { Kind::Config.class() }, message, None)
}
