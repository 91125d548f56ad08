//! The keyword table's tests.

use super::*;
