//! The arena plan: where every node output lives in the one buffer a run allocates.
//!
//! A run keeps all node outputs in a single `i32` arena. Validation gives each node output a
//! lifetime (the steps of the run it is alive over) and an offset into the arena such that two
//! values alive at a common step never share an element; the executor then only carves views
//! out of the arena. Model inputs and parameters are not in the arena.
//!
//! Steps are node indices; the step after the last node stands for the end of the run, when the
//! model outputs are copied out. A node output is alive from the node that defines it to the
//! last node that reads it, to the end of the run if it is a model output, and only during its
//! own node if nobody reads it. A node's inputs are alive while it runs, so its outputs never
//! share an element with its inputs, nor with each other.
//!
//! Placement is the offline "greedy by size" strategy (Pisarchyk and Lee, "Efficient Memory
//! Management for Deep Neural Net Inference", 2020, as in TensorFlow Lite's arena planner):
//! values are taken by size, largest first (ties by value index, so the plan is deterministic),
//! and each goes to the lowest offset where it collides with no already placed value whose
//! lifetime overlaps its own. Sizes and offsets are `u64` element counts with checked
//! arithmetic.
//!
//! Cost: the placed values overlapping a value are those alive at its first step, stored in a
//! segment tree over steps (each value in the O(log S) nodes that tile its lifetime, for S
//! steps), and those starting later within its lifetime, in a second segment tree by first
//! step; both count them and bound their highest end in O(log S). If at most
//! [`MAX_NEIGHBOURS`] (K) values overlap, they are listed (O(log S) each at worst) and the
//! lowest gap among them found after sorting them (O(K log K)). If more overlap, the value goes
//! right above the highest of them, so that an adversarial model (tens of thousands of values
//! all alive to the end) cannot make validation quadratic. In all, for V values,
//! O(V · (log V + K · log S)) time at worst, O(V log S) when few values overlap (as in real
//! networks), and O(V log S) memory. 65,536 values all alive to the end (one per node, every
//! one a model output) place in tens of milliseconds natively; searching among all of each
//! value's neighbours took half a minute.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::error::Result;
use crate::fail;

/// Most already placed, lifetime-overlapping values the lowest free offset is searched among;
/// a value that overlaps more is placed above all of them. Real networks stay far below it: in
/// the fixture and benchmark networks no value overlaps more than 3 placed ones.
pub const MAX_NEIGHBOURS: usize = 64;

/// A value to place: its size and the steps it is alive over, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// The first step it is alive: the index of the node that defines it.
    pub first: u32,
    /// The last step it is alive (at least `first`).
    pub last: u32,
    /// Size in `i32` elements.
    pub size: u64,
}

impl Lifetime {
    /// Whether the two values are alive at a common step.
    pub fn overlaps(&self, other: &Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// One node as the plan sees it: the values it reads (any value id) and the value ids of its
/// outputs, which are consecutive.
#[derive(Clone, Debug)]
pub struct PlanNode<'a> {
    /// Operand value ids, in any order, repeats allowed.
    pub inputs: &'a [usize],
    /// Value ids of the node's outputs.
    pub outputs: Range<usize>,
}

/// The lifetimes of the node outputs of a graph, in value id order starting at `first_node_value`
/// (node outputs are numbered after the inputs and parameters, node by node). `sizes[i]` is
/// the size of value `first_node_value + i`; `model_outputs` lists the values the run returns.
///
/// Ids below `first_node_value` (inputs and parameters) are ignored. Ids past the graph are
/// a caller bug and ignored too.
pub fn lifetimes(
    nodes: &[PlanNode<'_>],
    first_node_value: usize,
    sizes: &[u64],
    model_outputs: &[usize],
) -> Vec<Lifetime> {
    let end = nodes.len() as u32;
    let mut lifetimes: Vec<Lifetime> = sizes
        .iter()
        .map(|&size| Lifetime {
            first: 0,
            last: 0,
            size,
        })
        .collect();
    for (step, node) in nodes.iter().enumerate() {
        let step = step as u32;
        for id in node.outputs.clone() {
            if let Some(lifetime) = id
                .checked_sub(first_node_value)
                .and_then(|index| lifetimes.get_mut(index))
            {
                lifetime.first = step;
                lifetime.last = step;
            }
        }
        for &id in node.inputs {
            if let Some(lifetime) = id
                .checked_sub(first_node_value)
                .and_then(|index| lifetimes.get_mut(index))
            {
                lifetime.last = lifetime.last.max(step);
            }
        }
    }
    for &id in model_outputs {
        if let Some(lifetime) = id
            .checked_sub(first_node_value)
            .and_then(|index| lifetimes.get_mut(index))
        {
            lifetime.last = end;
        }
    }
    lifetimes
}

/// The offset of every value (in `i32` elements, in the order given) and the arena size: the
/// highest end of any value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Offset of each value.
    pub offsets: Vec<u64>,
    /// Elements the arena needs.
    pub size: u64,
}

/// Places `values` in one arena, greedy by size (module documentation).
///
/// A value of size 0 gets offset 0 and takes no room.
///
/// # Errors
/// `MemoryLimit` if an offset overflows `u64`; `InvalidReference` (an engine bug) if a lifetime
/// ends before it starts or there are more than 2^32 values.
pub fn place(values: &[Lifetime]) -> Result<Placement> {
    place_searching(values, MAX_NEIGHBOURS)
}

/// [`place`], searching for a gap among at most `max_neighbours` overlapping values.
fn place_searching(values: &[Lifetime], max_neighbours: usize) -> Result<Placement> {
    if u32::try_from(values.len()).is_err() {
        return Err(fail!(
            InvalidReference,
            "{} values to place (engine bug)",
            values.len()
        ));
    }
    if let Some(bad) = values.iter().find(|value| value.first > value.last) {
        return Err(fail!(
            InvalidReference,
            "a lifetime from step {} to step {} (engine bug)",
            bad.first,
            bad.last
        ));
    }
    let steps = values
        .iter()
        .map(|value| value.last as usize + 1)
        .max()
        .unwrap_or(0);
    let mut order: Vec<u32> = (0..values.len() as u32)
        .filter(|&index| values[index as usize].size > 0)
        .collect();
    order.sort_unstable_by(|&a, &b| {
        values[b as usize]
            .size
            .cmp(&values[a as usize].size)
            .then(a.cmp(&b))
    });

    let mut offsets = vec![0u64; values.len()];
    let mut ends = vec![0u64; values.len()];
    // The placed values overlapping a value are those alive at its first step (`alive`) and
    // those that start after it, no later than its last step (`by_first`): two disjoint sets.
    let mut alive = StepTree::new(steps);
    let mut by_first = FirstTree::new(steps);
    let mut neighbours: Vec<(u64, u64)> = Vec::with_capacity(max_neighbours);
    let mut pending: Vec<usize> = Vec::new();
    let mut size_needed: u64 = 0;
    for &index in &order {
        let value = values[index as usize];
        let later = (value.first < value.last).then(|| (value.first + 1, value.last));
        let n_neighbours = alive.count_at(value.first)
            + later.map_or(0, |(first, last)| by_first.count_over(first, last));
        let offset = if n_neighbours > max_neighbours {
            // Too many to search for a gap: right above the highest.
            let highest_later = later.map_or(0, |(first, last)| by_first.highest_over(first, last));
            alive.highest_at(value.first).max(highest_later)
        } else {
            neighbours.clear();
            alive.each_at(value.first, |other| {
                neighbours.push((offsets[other], ends[other]));
            });
            if let Some((first, last)) = later {
                by_first.each_over(first, last, &mut pending, |other| {
                    neighbours.push((offsets[other], ends[other]));
                });
            }
            lowest_free_offset(&mut neighbours, value.size)?
        };
        let end = offset.checked_add(value.size).ok_or_else(overflow)?;
        offsets[index as usize] = offset;
        ends[index as usize] = end;
        size_needed = size_needed.max(end);
        alive.insert(value.first, value.last, index as usize, end);
        by_first.insert(value.first, index as usize, end);
    }
    Ok(Placement {
        offsets,
        size: size_needed,
    })
}

fn overflow() -> crate::Error {
    fail!(MemoryLimit, "the arena's offsets overflow 64 bits")
}

/// The lowest offset where `size` elements fit without touching any of `taken` (start, end)
/// ranges; sorts `taken`.
fn lowest_free_offset(taken: &mut [(u64, u64)], size: u64) -> Result<u64> {
    taken.sort_unstable();
    let mut offset = 0u64;
    for &(start, end) in taken.iter() {
        if offset.checked_add(size).ok_or_else(overflow)? <= start {
            // Every later range starts at `start` or above.
            break;
        }
        offset = offset.max(end);
    }
    Ok(offset)
}

/// Marks the end of a list in [`Lists`].
const NONE: usize = usize::MAX;

/// Singly linked lists of value indices sharing one pool, so that storing a value in a list
/// costs no allocation of its own.
struct Lists {
    head: Vec<usize>,
    next: Vec<usize>,
    value: Vec<usize>,
}

impl Lists {
    fn new(n_lists: usize) -> Lists {
        Lists {
            head: vec![NONE; n_lists],
            next: Vec::new(),
            value: Vec::new(),
        }
    }

    fn push(&mut self, list: usize, value: usize) {
        self.next.push(self.head[list]);
        self.value.push(value);
        self.head[list] = self.value.len() - 1;
    }

    fn each(&self, list: usize, mut visit: impl FnMut(usize)) {
        let mut entry = self.head[list];
        while entry != NONE {
            visit(self.value[entry]);
            entry = self.next[entry];
        }
    }
}

/// Calls `visit` with the nodes of a segment tree of `leaves` leaves (root 1, children 2n and
/// 2n + 1, leaf of step s at `leaves` + s) whose step ranges tile `first..=last`: at most two
/// per level.
fn tile(leaves: usize, first: u32, last: u32, mut visit: impl FnMut(usize)) {
    let mut low = first as usize + leaves;
    let mut high = last as usize + 1 + leaves;
    while low < high {
        if low & 1 == 1 {
            visit(low);
            low += 1;
        }
        if high & 1 == 1 {
            high -= 1;
            visit(high);
        }
        low /= 2;
        high /= 2;
    }
}

/// The nodes of a segment tree of `leaves` leaves from the leaf of `step` up to the root.
fn path(leaves: usize, step: u32) -> impl Iterator<Item = usize> {
    core::iter::successors(Some(step as usize + leaves), |&node| {
        (node > 1).then_some(node / 2)
    })
}

/// Placed values by lifetime: a segment tree over steps where each value is stored in the
/// O(log S) nodes that tile its lifetime, so the values alive at a step are exactly those
/// stored on the path from the step's leaf to the root, each once.
struct StepTree {
    leaves: usize,
    stored: Lists,
    /// Per tree node: how many values are stored there, and their highest end.
    count: Vec<usize>,
    highest: Vec<u64>,
}

impl StepTree {
    fn new(steps: usize) -> StepTree {
        let leaves = steps.next_power_of_two();
        StepTree {
            leaves,
            stored: Lists::new(2 * leaves),
            count: vec![0; 2 * leaves],
            highest: vec![0; 2 * leaves],
        }
    }

    /// Stores `value`, alive over `first..=last` and ending at `end` in the arena.
    fn insert(&mut self, first: u32, last: u32, value: usize, end: u64) {
        tile(self.leaves, first, last, |node| {
            self.stored.push(node, value);
            self.count[node] += 1;
            self.highest[node] = self.highest[node].max(end);
        });
    }

    fn count_at(&self, step: u32) -> usize {
        path(self.leaves, step).map(|node| self.count[node]).sum()
    }

    fn highest_at(&self, step: u32) -> u64 {
        path(self.leaves, step)
            .map(|node| self.highest[node])
            .max()
            .unwrap_or(0)
    }

    fn each_at(&self, step: u32, mut visit: impl FnMut(usize)) {
        for node in path(self.leaves, step) {
            self.stored.each(node, &mut visit);
        }
    }
}

/// Placed values by first step: a list per step, and a segment tree over steps counting them
/// and keeping their highest end, to count, bound and find those starting in a range of steps.
struct FirstTree {
    leaves: usize,
    by_step: Lists,
    /// Per tree node: how many values start in its steps, and their highest end.
    count: Vec<usize>,
    highest: Vec<u64>,
}

impl FirstTree {
    fn new(steps: usize) -> FirstTree {
        let leaves = steps.next_power_of_two();
        FirstTree {
            leaves,
            by_step: Lists::new(leaves),
            count: vec![0; 2 * leaves],
            highest: vec![0; 2 * leaves],
        }
    }

    /// Records `value`, starting at `first` and ending at `end` in the arena.
    fn insert(&mut self, first: u32, value: usize, end: u64) {
        self.by_step.push(first as usize, value);
        for node in path(self.leaves, first) {
            self.count[node] += 1;
            self.highest[node] = self.highest[node].max(end);
        }
    }

    fn count_over(&self, first: u32, last: u32) -> usize {
        let mut count = 0;
        tile(self.leaves, first, last, |node| count += self.count[node]);
        count
    }

    fn highest_over(&self, first: u32, last: u32) -> u64 {
        let mut highest = 0;
        tile(self.leaves, first, last, |node| {
            highest = highest.max(self.highest[node]);
        });
        highest
    }

    /// Visits the values starting in `first..=last`: down from the tiling nodes, only into
    /// subtrees that hold some, so O(log S) nodes per value visited. `pending` is working
    /// space.
    fn each_over(
        &self,
        first: u32,
        last: u32,
        pending: &mut Vec<usize>,
        mut visit: impl FnMut(usize),
    ) {
        pending.clear();
        tile(self.leaves, first, last, |node| pending.push(node));
        while let Some(node) = pending.pop() {
            if self.count[node] == 0 {
                continue;
            }
            if node >= self.leaves {
                self.by_step.each(node - self.leaves, &mut visit);
            } else {
                pending.extend([2 * node, 2 * node + 1]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
