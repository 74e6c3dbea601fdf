//! `--set key=value`: override any scenario field by its dotted path, before the
//! scenario is parsed and validated.

use crate::scenario::ScenarioError;

/// Apply one `--set` argument to the scenario's YAML value.
pub fn apply_set(root: &mut serde_yaml::Value, arg: &str) -> Result<(), ScenarioError> {
    let (path, raw) = arg.split_once('=').ok_or_else(|| ScenarioError::Set {
        arg: arg.into(),
        message: "expected key=value, e.g. --set rate=2000 or --set drain.max=30s".into(),
    })?;
    let new: serde_yaml::Value = serde_yaml::from_str(raw).map_err(|e| ScenarioError::Set {
        arg: arg.into(),
        message: e.to_string(),
    })?;
    let mut cur = root;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            return Err(ScenarioError::Set {
                arg: arg.into(),
                message: "empty path segment".into(),
            });
        }
        if !cur.is_mapping() {
            if cur.is_null() {
                *cur = serde_yaml::Value::Mapping(Default::default());
            } else {
                return Err(ScenarioError::Set {
                    arg: arg.into(),
                    message: format!("`{}` is not a section", parts[..i].join(".")),
                });
            }
        }
        let map = cur.as_mapping_mut().expect("checked mapping");
        let key = serde_yaml::Value::String((*part).to_string());
        if i + 1 == parts.len() {
            map.insert(key, new);
            return Ok(());
        }
        cur = map
            .entry(key)
            .or_insert(serde_yaml::Value::Mapping(Default::default()));
    }
    Ok(())
}
