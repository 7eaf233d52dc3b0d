//! The docs' examples run as written (issue 31: docs/goals.md's example goal failed as copied,
//! its deadline in the past). The `sh` blocks of docs/jobs.md "Making jobs" and docs/goals.md
//! "Commands", and the goal of docs/goals.md "A goal" (saved as the `dentist.goal.json` the
//! commands name), are parsed out of the docs and run through `sh` against a real daemon,
//! with the built `openphone` first on PATH. A placeholder (`<job>`, `goal_01J…`) is the id
//! an earlier command printed; an `[optional]` argument is left out. Commands the test cannot run as written are named below with
//! why, so a new example is either run or consciously skipped.

use std::path::Path;
use std::process::{Command, Stdio};

use super::harness::{serve, write_config};
use super::mcp_harness::repo_root;

/// Commands of the goals block that are not run, and why.
const GOALS_NOT_RUN: &[(&str, &str)] = &[
    (
        "openphone goals approve ",
        "the example's move step waits for its approval only once the goal got there",
    ),
    (
        "openphone goals answer ",
        "the example goal has no ask_user step",
    ),
    (
        "openphone goals retry ",
        "the example goal has no blocked step",
    ),
    (
        "openphone goals plan ",
        "plan.json is not given in the docs",
    ),
    (
        "openphone goals pause|resume|tick ",
        "shorthand for three commands",
    ),
];

/// The fenced blocks (info string, lines) of the section of `doc` under `heading` (up to the
/// next heading of the same or a higher level).
fn blocks(doc: &str, heading: &str) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(repo_root().join(doc)).unwrap();
    let level = heading.split(' ').next().unwrap();
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{doc} has a `{heading}` section"));
    let section = &text[start + 1 + heading.len()..];
    let end = section
        .lines()
        .scan(0, |at, line| {
            let here = *at;
            *at += line.len() + 1;
            Some((here, line))
        })
        .find(|(_, line)| {
            line.starts_with('#')
                && line
                    .split(' ')
                    .next()
                    .is_some_and(|hashes| hashes.len() <= level.len())
        })
        .map_or(section.len(), |(at, _)| at);
    let mut out = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in section[..end].lines() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(info), None) => open = Some((info.trim().to_owned(), Vec::new())),
            (Some(_), Some(block)) => out.push(block),
            (None, Some((info, mut lines))) => {
                lines.push(line.to_owned());
                open = Some((info, lines));
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed block in {doc} {heading}");
    out
}

/// The commands of the `sh` blocks: `\` continuations joined, `# comments` dropped.
fn commands(blocks: &[(String, Vec<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in blocks
        .iter()
        .filter(|(info, _)| info == "sh")
        .flat_map(|(_, l)| l)
    {
        let line = without_comment(line);
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head.trim_start());
            continue;
        }
        pending.push_str(line.trim_start());
        if !pending.trim().is_empty() {
            out.push(pending.trim().to_owned());
        }
        pending.clear();
    }
    out
}

/// A shell line without its trailing `# comment` (a `#` after a blank, outside quotes).
fn without_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return line[..i].trim_end(),
            None => {}
        }
        previous = c;
    }
    line.trim_end()
}

/// Runs `line` through `sh` in `dir` against the daemon of `data`, local time UTC.
fn sh(line: &str, dir: &Path, data: &Path) -> (i32, String, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_openphone")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env("OPENPHONE_DATA_DIR", data)
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `line` without its `[optional]` arguments.
fn optional_dropped(line: &str) -> String {
    line.split(' ')
        .filter(|word| !(word.starts_with('[') && word.ends_with(']')))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `text` holds a run of 12 or more digits: a Unix-ms time shown to a person.
fn has_epoch_ms(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|run| run.len() >= 12)
}

#[test]
fn the_docs_job_and_goal_examples_run_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let _daemon = serve(&data, &write_config(tmp.path()));

    // docs/jobs.md, "Making jobs".
    let mut job: Option<String> = None;
    let mut said = Vec::new();
    for line in commands(&blocks("docs/jobs.md", "## Making jobs")) {
        assert!(line.starts_with("openphone jobs "), "{line}");
        let line = match &job {
            Some(id) => line.replace("<job>", id),
            None => {
                assert!(!line.contains("<job>"), "no job made yet for: {line}");
                line
            }
        };
        let (code, out, err) = sh(&line, tmp.path(), &data);
        assert_eq!(code, 0, "{line}\nstdout: {out}\nstderr: {err}");
        // `<job>` is the latest job made (the last example runs in 2030: it stays queued).
        if let Some(id) = out
            .strip_prefix("created: #")
            .and_then(|rest| rest.split(' ').next())
        {
            job = Some(id.to_owned());
        }
        said.push((line, out));
    }
    let out = |prefix: &str| -> &str {
        &said
            .iter()
            .find(|(line, _)| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("docs/jobs.md no longer runs {prefix}"))
            .1
    };
    // Times read as local times with the zone, never as milliseconds.
    let standup = out("openphone jobs create --title \"Standup\"");
    assert!(standup.contains(" 09:00 UTC (in "), "{standup}");
    let renewal = out("openphone jobs create --title \"Renewal\"");
    assert!(
        renewal.contains("next Wed 13 Mar 2030 08:00 UTC (in "),
        "{renewal}"
    );
    let list = out("openphone jobs list");
    assert!(
        list.contains("\"Ping\"") && list.contains(" next "),
        "{list}"
    );
    assert!(!has_epoch_ms(list), "{list}");

    // docs/goals.md: the example goal, saved as the file the commands name.
    let goal_blocks = blocks("docs/goals.md", "## A goal");
    let spec = &goal_blocks
        .iter()
        .find(|(info, _)| info == "json")
        .expect("docs/goals.md shows a goal")
        .1;
    std::fs::write(tmp.path().join("dentist.goal.json"), spec.join("\n")).unwrap();
    let mut goal: Option<String> = None;
    let mut shown = Vec::new();
    for line in commands(&blocks("docs/goals.md", "### Commands")) {
        if let Some((_, why)) = GOALS_NOT_RUN.iter().find(|(p, _)| line.starts_with(p)) {
            eprintln!("not run: {line} ({why})");
            continue;
        }
        let line = match &goal {
            Some(id) => line.replace("goal_01J…", id),
            None => line,
        };
        // `[move]` is an optional argument: run without it.
        let line = optional_dropped(&line);
        assert!(!line.contains("goal_01J…"), "no goal made yet for: {line}");
        let (code, out, err) = sh(&line, tmp.path(), &data);
        assert_eq!(code, 0, "{line}\nstdout: {out}\nstderr: {err}");
        if goal.is_none()
            && let Some(id) = out
                .strip_prefix("created: ")
                .and_then(|rest| rest.lines().next())
        {
            goal = Some(id.trim().to_owned());
        }
        shown.push((line, out));
    }
    let goal = goal.expect("the goals commands create the example goal");
    let show = &shown
        .iter()
        .find(|(line, _)| line.starts_with("openphone goals show "))
        .expect("the goals commands show the goal")
        .1;
    let deadline = show
        .lines()
        .find(|l| l.trim_start().starts_with("deadline: "))
        .unwrap_or_else(|| panic!("{goal} shows its deadline: {show}"));
    // `deadline_in: "6h"`: six hours from now, as a local time.
    assert!(
        deadline.contains(" UTC (in 5 h 59 min)") || deadline.contains(" UTC (in 6 h)"),
        "{deadline}"
    );
    assert!(!has_epoch_ms(show), "{show}");
    // `--deadline "tomorrow 18:00"`: the second goal's deadline is tomorrow at 18:00.
    let second = &shown
        .iter()
        .find(|(line, _)| line.contains("--deadline"))
        .expect("the goals commands show --deadline")
        .1;
    assert!(second.contains(" 18:00 UTC (in "), "{second}");
}
