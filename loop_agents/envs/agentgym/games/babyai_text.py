"""AgentGym's BabyAI text interface, re-implemented from its description (agentenv-babyai, environment.py):
a text description of what the agent sees, and high-level text actions ("go to red ball 1", "pickup
grey key 1", "toggle and go through blue locked door 1", "check available actions") that expand into
minigrid's primitive actions by breadth-first search inside the agent's 7x7 view.

Kept as AgentGym has it, so that the same game state gives the same text, actions and rewards:
- objects are numbered per name, nearest first (Manhattan distance), counting only reachable ones for
  `pickup`/`go to`; doors are numbered among all doors of that name;
- the search treats walls, boxes, lava, balls and keys as obstacles, stays inside the view's bounding
  range, and is only bounded when something is in view (AgentGym's loop structure);
- a macro action stops at the first primitive action that leaves the view image unchanged;
- the action listing's pickup actions are spelled `pickup <obj> <n>` (AgentGym's prompt says "pick up";
  its server only accepts "pickup").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

DIR_TO_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))  # minigrid's direction index -> (dx, dy)
OBJECT_NAMES = {2: "wall", 4: "door", 5: "key", 6: "ball", 7: "box", 8: "goal", 9: "lava"}
COLOR_NAMES = ("red", "green", "blue", "purple", "yellow", "grey")
DOOR_STATES = ("open", "closed", "locked")
OBSTACLE_WORDS = ("wall", "box", "lava", "ball", "key")
TURN_LEFT, TURN_RIGHT, FORWARD, PICKUP, DROP, TOGGLE = range(6)
CHECK = "check available actions"


@dataclass
class Seen:
    name: str  # "red ball", "blue locked door", "grey wall"
    pos: tuple[int, int]  # absolute grid position
    dis: int  # Manhattan distance (objects) or signed distance along the facing direction (barriers)


def _dot(a: tuple[int, int], b: tuple[int, int]) -> int:
    return a[0] * b[0] + a[1] * b[1]


def _span(start: int, border: int) -> range:
    """AgentGym's bounding range of the view along one axis (asymmetric on purpose: it is theirs)."""
    return range(border, start + 1) if border < start else range(start, border)


class ViewScan:
    """What one observation shows: objects, barriers straight ahead, and the search bounds."""

    def __init__(self, unwrapped, image, direction: int) -> None:
        size = unwrapped.agent_view_size
        self.pos = (int(unwrapped.agent_pos[0]), int(unwrapped.agent_pos[1]))
        self.dir = int(direction)
        fx, fy = (int(v) for v in unwrapped.dir_vec)
        rx, ry = (int(v) for v in unwrapped.right_vec)
        top = (
            self.pos[0] + fx * (size - 1) - rx * (size // 2),
            self.pos[1] + fy * (size - 1) - ry * (size // 2),
        )
        self.xrange = _span(top[0], top[0] + size * (rx - fx))
        self.yrange = _span(top[1], top[1] + size * (ry - fy))
        self.objects: list[Seen] = []
        self.barriers: list[Seen] = []
        facing = DIR_TO_VEC[self.dir]
        for vj in range(size):
            for vi in range(size):
                x, y = top[0] - fx * vj + rx * vi, top[1] - fy * vj + ry * vi
                distance = abs(self.pos[0] - x) + abs(self.pos[1] - y)
                if x < 0 or y < 0 or distance == 0:
                    continue
                kind = OBJECT_NAMES.get(int(image[vi, vj, 0]))
                if kind is None:
                    continue
                color = COLOR_NAMES[int(image[vi, vj, 1])]
                name = (
                    f"{color} {DOOR_STATES[int(image[vi, vj, 2])]} door"
                    if kind == "door"
                    else f"{color} {kind}"
                )
                self.objects.append(Seen(name, (x, y), distance))
                rel = (x - self.pos[0], y - self.pos[1])
                if kind in ("box", "wall") and facing[0] * rel[1] - facing[1] * rel[0] == 0:
                    self.barriers.append(Seen(kind, (x, y), _dot(facing, rel)))
        self.objects.sort(key=lambda seen: seen.dis)
        self.barriers.sort(key=lambda seen: seen.dis)

    def relative(self, seen: Seen) -> tuple[int, int]:
        """(steps ahead, steps to the right) of an object."""
        rel = (seen.pos[0] - self.pos[0], seen.pos[1] - self.pos[1])
        return _dot(DIR_TO_VEC[self.dir], rel), _dot(DIR_TO_VEC[(self.dir + 1) % 4], rel)

    def find_path(self, goal: tuple[int, int], arrive: bool) -> list[int] | None:
        """Primitive actions from the agent to stand on `goal` (arrive) or to face it from next door.

        Breadth-first over (position, direction) with actions tried in the order forward, left, right;
        a state's recorded predecessor is the last one that reached it before it was expanded."""
        things = self.objects + self.barriers
        start = (self.pos, self.dir)
        parent: dict[tuple, tuple[tuple, int]] = {}
        expanded: set[tuple] = set()
        queue = deque([start])
        while queue:
            state = queue.popleft()
            expanded.add(state)
            (x, y), d = state
            reached = (x, y) == goal if arrive else (goal[0] - x, goal[1] - y) == DIR_TO_VEC[d]
            if reached:
                path = []
                while state != start:
                    state, action = parent[state]
                    path.append(action)
                return path[::-1]
            for action in (FORWARD, TURN_LEFT, TURN_RIGHT):
                if action == FORWARD:
                    nxt = ((x + DIR_TO_VEC[d][0], y + DIR_TO_VEC[d][1]), d)
                else:
                    nxt = ((x, y), (d - 1) % 4 if action == TURN_LEFT else (d + 1) % 4)
                if things and self._blocked(nxt, expanded, things):
                    continue
                queue.append(nxt)
                parent[nxt] = (state, action)
        return None

    def _blocked(self, state: tuple, expanded: set[tuple], things: list[Seen]) -> bool:
        (x, y), _ = state
        if x not in self.xrange or y not in self.yrange or state in expanded:
            return True
        return any(t.pos == (x, y) and any(w in t.name for w in OBSTACLE_WORDS) for t in things)


def describe(scan: ViewScan, carrying) -> str:
    """AgentGym's observation text: objects with relative positions, the barrier ahead, what is carried."""
    if scan.objects:
        text, counts = "In front of you in this room, you can see several objects: ", {}
        for seen in scan.objects:
            if "wall" in seen.name:
                continue
            ahead, right = scan.relative(seen)
            if right == 0:
                where = f"right in front of you {ahead} steps away. "
            else:
                side = "right" if right > 0 else "left"
                where = f"{ahead} steps in front of you and {abs(right)} steps to your {side}. "
            counts[seen.name] = counts.get(seen.name, 0) + 1
            text += f"There is a {seen.name} {counts[seen.name]} {where} "
    else:
        text = "You cannot see any objects within sight."
    text += "The room has walls around you. "
    if scan.barriers:
        text += f"You are facing a {scan.barriers[0].name} {scan.barriers[0].dis} steps away. "
    if carrying is not None:
        return text + f"You are carrying a {carrying.color} {carrying.type}."
    return text + "You are not carrying anything."


def action_space(scan: ViewScan, carrying) -> tuple[dict[str, list[int]], dict[str, str]]:
    """AgentGym's high-level actions (name -> primitive actions, in its listing order) and the
    explanations it gives for actions that are not possible right now."""
    actions: dict[str, list[int]] = {"turn left": [TURN_LEFT], "turn right": [TURN_RIGHT]}
    errors: dict[str, str] = {}
    if not scan.barriers or scan.barriers[0].dis > 1:
        actions["move forward"] = [FORWARD]
    else:
        errors["move forward"] = "There is a barrier in front of you, you can't move forward."
    if carrying is None:
        counts: dict[str, int] = {}
        for seen in scan.objects:
            if any(w in seen.name for w in ("wall", "door", "goal")):
                continue
            path = scan.find_path(seen.pos, arrive=False)
            first = f"pickup {seen.name} 1"
            if path is not None:
                counts[seen.name] = 1 if first not in actions else counts[seen.name] + 1
                actions[f"pickup {seen.name} {counts[seen.name]}"] = [*path, PICKUP]
            else:
                n = 1 if first not in actions else counts[seen.name] + 1
                errors[f"pickup {seen.name} {n}"] = (
                    f"You cannot pickup {seen.name} {n}, as there is no path leading to it."
                )
        errors["drop"] = "You cannot drop the object, as you are not carrying anything."
    else:
        front = (scan.pos[0] + DIR_TO_VEC[scan.dir][0], scan.pos[1] + DIR_TO_VEC[scan.dir][1])
        if any(s.pos == front and any(w in s.name for w in OBSTACLE_WORDS) for s in scan.objects):
            errors["drop"] = "You cannot drop the object, as there is already an object in front of you."
        else:
            actions["drop"] = [DROP]
    _door_actions(scan, carrying, actions, errors)
    for seen in scan.objects:
        if "goal" in seen.name:
            path = scan.find_path(seen.pos, arrive=True)
            if path is not None:
                actions["go to goal"] = path
            else:
                errors["go to goal"] = "You cannot go to the goal, as there is no path leading to it."
    counts = {}
    for seen in scan.objects:
        if "wall" in seen.name or "goal" in seen.name:
            continue
        path = scan.find_path(seen.pos, arrive=False)
        first = f"go to {seen.name} 1"
        if path is not None:
            counts[seen.name] = 1 if first not in actions else counts[seen.name] + 1
            actions[f"go to {seen.name} {counts[seen.name]}"] = path
        else:
            n = 1 if first not in actions else counts[seen.name] + 1
            errors[f"go to {seen.name} {n}"] = (
                f"You cannot go to {seen.name} {n}, as there is no path leading to it."
            )
    actions[CHECK] = []
    return actions, errors


def _door_actions(scan: ViewScan, carrying, actions: dict[str, list[int]], errors: dict[str, str]) -> None:
    counts: dict[str, int] = {}
    for seen in scan.objects:
        if "door" not in seen.name:
            continue
        counts[seen.name] = counts.get(seen.name, 0) + 1
        label = f"{seen.name} {counts[seen.name]}"
        if "open door" in seen.name:
            path = scan.find_path(seen.pos, arrive=True)
            if path is not None:
                actions[f"go through {label}"] = path
            else:
                errors[f"go through {label}"] = (
                    f"You cannot go through {label}, as there is no path leading to it."
                )
            continue
        if "locked door" in seen.name:
            if carrying is None or carrying.type != "key":
                errors[f"toggle and go through {label}"] = (
                    f"You cannot toggle and go through {label}, as you are not carrying a key."
                )
                continue
            if carrying.color != seen.name.split(" ")[0]:
                errors[f"toggle and go through {label}"] = (
                    f"You cannot toggle and go through {label}, as the color of the key you are carrying "
                    "does not match the color of door."
                )
                continue
        path = scan.find_path(seen.pos, arrive=False)
        if path is not None:
            actions[f"toggle and go through {label}"] = [*path, TOGGLE, FORWARD]
        else:
            # AgentGym's message prints its whole door-count dict instead of the door's number
            errors[f"toggle and go through {label}"] = (
                f"You cannot toggle and go through {seen.name} {counts}, as there is no path leading to it."
            )
        if path == []:
            actions["toggle"] = [TOGGLE]
        if "closed door" in seen.name:
            errors[f"go through {label}"] = (
                f"You cannot go through {label}, as it is closed. You should toggle it first."
            )


def listing(actions: dict[str, list[int]]) -> str:
    """The line AgentGym's server appends to every observation."""
    return "\nAvailable actions: [" + ", ".join(f'"{name}"' for name in actions) + "]"
