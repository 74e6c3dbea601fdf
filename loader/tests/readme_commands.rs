//! README.md's command table lists every subcommand `crossbench --help` lists, and
//! nothing else: a newcomer who reads only the README learns every command there is
//! (it once left out `campaign`, `ceiling`, `findings`, `gate`, `sample` and
//! `selftest`).

mod support;

use std::collections::BTreeSet;

/// The subcommands `crossbench --help` lists (without clap's own `help`).
fn help_commands() -> BTreeSet<String> {
    let o = support::binary().arg("--help").output().unwrap();
    assert!(o.status.success(), "crossbench --help fails");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let section = text
        .split("Commands:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no `Commands:` in --help:\n{text}"));
    section
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The subcommands README.md's `## Commands` table has a row for.
fn readme_commands() -> BTreeSet<String> {
    let readme = include_str!("../../README.md");
    let table = readme
        .split("## Commands\n")
        .nth(1)
        .expect("README.md has a `## Commands` section")
        .split("\n## ")
        .next()
        .unwrap();
    table
        .lines()
        .filter_map(|l| l.strip_prefix("| `crossbench "))
        .filter_map(|rest| rest.split([' ', '`']).next().map(str::to_string))
        .collect()
}

#[test]
fn the_readme_command_table_lists_every_subcommand_of_help() {
    let help = help_commands();
    let readme = readme_commands();
    assert!(help.len() >= 13, "--help lists {help:?}");
    let missing: Vec<&String> = help.difference(&readme).collect();
    let extra: Vec<&String> = readme.difference(&help).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README.md's command table lacks {missing:?} and lists {extra:?}, which --help does not"
    );
}
