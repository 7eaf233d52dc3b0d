//! [`GoalStore`] on PostgreSQL.
//!
//! Stubs until the domain is written: each method answers `StoreError::Backend` "not
//! implemented on PostgreSQL yet".

#![allow(unused_variables, unused_imports)]

use std::path::Path;

use openphone_store::*;
use serde_json::Value;

use crate::PgStore;

fn todo(op: &'static str) -> StoreError {
    StoreError::Backend {
        op,
        id: String::new(),
        detail: "not implemented on PostgreSQL yet".to_owned(),
    }
}

impl GoalStore for PgStore {
    fn create_goal(
        &self,
        goal: &StoredGoal,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<StoredGoal> {
        Err(todo("goals.create_goal"))
    }

    fn update_goal(
        &self,
        next: &StoredGoal,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<StoredGoal> {
        Err(todo("goals.update_goal"))
    }

    fn update_goal_text(
        &self,
        next: GoalText,
        transitions: Vec<NewGoalTransition>,
        reports: Vec<NewGoalReport>,
    ) -> Result<i64> {
        Err(todo("goals.update_goal_text"))
    }

    fn goal_version(&self, goal_id: &str) -> Result<Option<i64>> {
        Err(todo("goals.goal_version"))
    }

    fn get_goal_text(&self, goal_id: &str) -> Result<Option<GoalText>> {
        Err(todo("goals.get_goal_text"))
    }

    fn get_goal(&self, goal_id: &str) -> Result<Option<StoredGoal>> {
        Err(todo("goals.get_goal"))
    }

    fn list_goals(&self, states: &[&str], limit: Option<usize>) -> Result<Vec<StoredGoal>> {
        Err(todo("goals.list_goals"))
    }

    fn goal_transitions(&self, goal_id: &str) -> Result<Vec<GoalTransition>> {
        Err(todo("goals.goal_transitions"))
    }

    fn goal_reports(&self, goal_id: &str) -> Result<Vec<GoalReport>> {
        Err(todo("goals.goal_reports"))
    }

    fn pending_goal_reports(&self, limit: usize) -> Result<Vec<GoalReport>> {
        Err(todo("goals.pending_goal_reports"))
    }

    fn set_goal_report_delivery(
        &self,
        goal_id: &str,
        seq: i64,
        delivery: ReportDelivery,
        error: &str,
    ) -> Result<()> {
        Err(todo("goals.set_goal_report_delivery"))
    }
}
