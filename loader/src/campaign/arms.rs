//! A campaign's arms: every group's matrix expanded into its combinations, each
//! resolved into the scenario it runs (validated now, before anything runs), or
//! recorded as not run when an environment variable it needs is unset.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::campaign::file::{resolve, set_arg, CampaignError, CampaignFile, Group, Sets};
use crate::scenario::{self, Loaded, ScenarioError};

/// One arm: a scenario with its overrides, run `repeats` times.
#[derive(Debug, Clone, Serialize)]
pub struct Arm {
    /// `<group>` or `<group>[path=value,…]`.
    pub id: String,
    /// The arm's directory name (and its cells' scenario name).
    pub slug: String,
    pub group: String,
    pub scenario: PathBuf,
    /// The overrides, as `--set` arguments, in the order they apply.
    pub sets: Vec<String>,
    /// The overrides as the file writes them, `${VAR}` unexpanded: what an arm that
    /// does not run records as its `sets`, so `--resume` knows it once it can run.
    #[serde(skip)]
    pub declared: Vec<String>,
    /// The matrix point (path → value as written).
    pub point: BTreeMap<String, String>,
    /// Why the arm does not run here (`None`: it runs).
    pub not_run: Option<String>,
    /// In a ceiling campaign: the range searched for this arm, when its group sets one.
    pub between: Option<[u64; 2]>,
    /// Cells of this arm (its group's `repeats`, or the campaign's).
    pub repeats: u32,
    /// The resolved scenario (absent when not run).
    #[serde(skip)]
    pub loaded: Option<Loaded>,
}

impl Arm {
    /// The scenario's system, or the group's name when not resolved.
    pub fn system(&self) -> String {
        self.loaded
            .as_ref()
            .map_or_else(|| "?".into(), |l| l.scenario.system.name().to_string())
    }
}

/// `<value>` as a path-safe word.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

fn text(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim_end()
            .to_string(),
    }
}

/// Every combination of the matrix, in the order of its (sorted) paths and of each
/// path's values.
fn combinations(
    m: &BTreeMap<String, Vec<serde_yaml::Value>>,
) -> Vec<Vec<(String, serde_yaml::Value)>> {
    let mut out: Vec<Vec<(String, serde_yaml::Value)>> = vec![Vec::new()];
    for (k, vs) in m {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                vs.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push((k.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    out
}

/// The arms of a campaign file at `path`.
pub fn expand(file: &CampaignFile, path: &Path) -> Result<Vec<Arm>, CampaignError> {
    let mut arms = Vec::new();
    for (gi, g) in file.groups().iter().enumerate() {
        let field = if file.scenario.is_some() && gi == 0 {
            String::new()
        } else {
            let i = gi - usize::from(file.scenario.is_some());
            format!("groups[{i}].")
        };
        expand_group(file, path, g, &field, &mut arms)?;
    }
    if let Some(p) = &file.published {
        expand_published(file, path, p, &mut arms)?;
    }
    for (i, f) in file.findings.iter().enumerate() {
        f.validate().map_err(|message| CampaignError::Invalid {
            path: path.display().to_string(),
            field: format!("findings[{i}] ({})", f.id),
            message,
        })?;
        {
            for id in f.arms() {
                if !arms.iter().any(|x| x.id == id) {
                    return Err(CampaignError::Invalid {
                        path: path.display().to_string(),
                        field: format!("findings[{i}] ({})", f.id),
                        message: format!(
                            "names arm `{id}`, which the campaign does not have (its arms: {})",
                            arms.iter()
                                .map(|x| x.id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                }
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in &arms {
        if !seen.insert(a.slug.clone()) {
            return Err(CampaignError::Invalid {
                path: path.display().to_string(),
                field: "groups".into(),
                message: format!(
                    "two arms would share the directory {}; give the groups distinct `name`s",
                    a.slug
                ),
            });
        }
    }
    Ok(arms)
}

fn expand_group(
    file: &CampaignFile,
    path: &Path,
    g: &Group,
    field: &str,
    arms: &mut Vec<Arm>,
) -> Result<(), CampaignError> {
    let scenario = resolve(path, &g.scenario);
    let missing: Vec<String> = g
        .requires_env
        .iter()
        .filter(|v| std::env::var_os(v).is_none_or(|x| x.is_empty()))
        .cloned()
        .collect();
    for point in combinations(&g.matrix) {
        let mut sources: Vec<(String, String, serde_yaml::Value)> = Vec::new();
        for (k, v) in &file.set {
            sources.push((format!("set.{k}"), k.clone(), v.clone()));
        }
        for (k, v) in &g.set {
            sources.push((format!("{field}set.{k}"), k.clone(), v.clone()));
        }
        for (k, v) in &point {
            sources.push((format!("{field}matrix.{k}"), k.clone(), v.clone()));
        }
        let point_text: BTreeMap<String, String> =
            point.iter().map(|(k, v)| (k.clone(), text(v))).collect();
        let id = if point.is_empty() {
            g.name.clone()
        } else {
            format!(
                "{}[{}]",
                g.name,
                point_text
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        let mut resolved = resolve_arm(path, id, &g.name, &scenario, &sources, &missing)?;
        for a in &mut resolved {
            a.between = g.between;
            a.repeats = g.repeats.unwrap_or(file.repeats);
        }
        arms.extend(resolved);
    }
    Ok(())
}

/// Resolve one arm (or, for a stream scenario with a ladder, one arm per rate).
fn resolve_arm(
    path: &Path,
    id: String,
    group: &str,
    scenario: &Path,
    sources: &[(String, String, serde_yaml::Value)],
    missing_env: &[String],
) -> Result<Vec<Arm>, CampaignError> {
    let invalid = |field: &str, message: String| CampaignError::Invalid {
        path: path.display().to_string(),
        field: field.into(),
        message,
    };
    let base_slug = slug(&id.replace('[', "_").replace(['=', ','], "-"));
    let mut arm = Arm {
        slug: base_slug.clone(),
        id,
        group: group.into(),
        scenario: scenario.to_path_buf(),
        sets: Vec::new(),
        declared: sources
            .iter()
            .map(|(_, k, v)| format!("{k}={}", text(v)))
            .collect(),
        point: BTreeMap::new(),
        not_run: None,
        between: None,
        repeats: 1,
        loaded: None,
    };
    if !missing_env.is_empty() {
        let verb = if missing_env.len() == 1 { "is" } else { "are" };
        arm.not_run = Some(format!(
            "not run: {} {verb} not set",
            missing_env.join(", ")
        ));
        arm.sets = arm.declared.clone();
        return Ok(vec![arm]);
    }
    let mut field_of: Vec<(String, String)> = Vec::new();
    for (field, k, v) in sources {
        let arg = set_arg(k, v).map_err(|var| {
            invalid(
                field,
                format!("uses ${{{var}}}, which is not set; set it or add it to requires_env"),
            )
        })?;
        field_of.push((arg.clone(), field.clone()));
        arm.sets.push(arg);
    }
    arm.sets.push(format!("name={}", arm.slug));
    let loaded = scenario::load(scenario, &arm.sets).map_err(|e| match &e {
        ScenarioError::Set { arg, message } => {
            let field = field_of
                .iter()
                .find(|(a, _)| a == arg)
                .map_or("set", |(_, f)| f.as_str());
            invalid(field, message.clone())
        }
        ScenarioError::Read { .. } => invalid("scenario", e.to_string()),
        // A value the scenario rejects: the campaign field that set it (the last of
        // them, as the last set wins), or the scenario file when none did.
        ScenarioError::Invalid { field, .. } => invalid(
            sources
                .iter()
                .rev()
                .find(|(_, k, _)| k == field || field.starts_with(&format!("{k}.")))
                .map_or("scenario", |s| s.0.as_str()),
            e.to_string(),
        ),
        ScenarioError::Parse { .. } => invalid("scenario", e.to_string()),
    })?;
    // A stream ladder is a matrix over `rate`: one arm per rate.
    let ladder = loaded
        .scenario
        .stream
        .as_ref()
        .map(|st| st.ladder.clone())
        .unwrap_or_default();
    if ladder.is_empty() {
        arm.loaded = Some(loaded);
        return Ok(vec![arm]);
    }
    let mut out = Vec::new();
    for rate in ladder {
        let mut a = arm.clone();
        a.id = if a.id.ends_with(']') {
            format!("{},rate={rate}]", &a.id[..a.id.len() - 1])
        } else {
            format!("{}[rate={rate}]", a.id)
        };
        a.slug = format!("{base_slug}_rate-{rate}");
        a.point.insert("rate".into(), rate.to_string());
        a.sets.pop();
        a.sets.push("stream.ladder=[]".into());
        a.sets.push(format!("rate={rate}"));
        a.sets.push(format!("name={}", a.slug));
        a.loaded = Some(
            scenario::load(scenario, &a.sets).map_err(|e| invalid("scenario", e.to_string()))?,
        );
        out.push(a);
    }
    Ok(out)
}

fn expand_published(
    file: &CampaignFile,
    path: &Path,
    p: &crate::campaign::file::PublishedGroup,
    arms: &mut Vec<Arm>,
) -> Result<(), CampaignError> {
    let dir = resolve(path, &p.dir);
    let invalid = |field: &str, message: String| CampaignError::Invalid {
        path: path.display().to_string(),
        field: field.into(),
        message,
    };
    let cells =
        report::published::load_dir(&dir).map_err(|e| invalid("published.dir", e.to_string()))?;
    for id in &p.ids {
        if !cells.iter().any(|c| &c.id == id) {
            return Err(invalid(
                "published.ids",
                format!("{id} is not a published cell in {}", dir.display()),
            ));
        }
    }
    // Published scenario paths are repository-relative: the published directory's
    // grandparent (results/published → the repository).
    let repo = dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    for c in cells {
        if !p.ids.is_empty() && !p.ids.contains(&c.id) {
            continue;
        }
        let repro = &c.reproduce;
        let Some(scn) = &repro.scenario else { continue };
        if repro.not_here.is_some() {
            continue;
        }
        let scenario = repo.join(scn);
        let mut sources: Vec<(String, String, serde_yaml::Value)> = file
            .set
            .iter()
            .map(|(k, v)| (format!("set.{k}"), k.clone(), v.clone()))
            .collect();
        for s in &repro.sets {
            let (k, v) = s.split_once('=').unwrap_or((s.as_str(), ""));
            let v: serde_yaml::Value =
                serde_yaml::from_str(v).unwrap_or(serde_yaml::Value::String(v.into()));
            sources.push((format!("published {}: reproduce.sets", c.id), k.into(), v));
        }
        let system = c.system.clone();
        let extra: Sets = p.set.get(&system).cloned().unwrap_or_default();
        for (k, v) in extra {
            sources.push((format!("published.set.{system}.{k}"), k, v));
        }
        let missing: Vec<String> = p
            .requires_env
            .get(&system)
            .into_iter()
            .flatten()
            .filter(|v| std::env::var_os(v).is_none_or(|x| x.is_empty()))
            .cloned()
            .collect();
        let mut resolved = resolve_arm(
            path,
            c.id.clone(),
            "published",
            &scenario,
            &sources,
            &missing,
        )?;
        for a in &mut resolved {
            a.repeats = file.repeats;
        }
        arms.extend(resolved);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_is_every_combination() {
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), vec![1.into(), 2.into()]);
        m.insert("b".to_string(), vec!["x".into(), "y".into(), "z".into()]);
        let c = combinations(&m);
        assert_eq!(c.len(), 6);
        assert_eq!(text(&c[0][0].1), "1");
        assert_eq!(text(&c[5][1].1), "z");
        assert_eq!(combinations(&BTreeMap::new()).len(), 1);
    }

    #[test]
    fn slugs_are_path_safe() {
        assert_eq!(slug("smoke_rate-100_lanes-2]"), "smoke_rate-100_lanes-2");
        assert_eq!(slug("a/b c"), "a_b_c");
    }
}
