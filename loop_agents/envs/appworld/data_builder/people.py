"""Synthetic people: the supervisor (main user) and their contacts, drawn from a seeded RNG."""

from __future__ import annotations

import random
from dataclasses import dataclass

FIRST_NAMES = (
    "Aisha Bruno Chen Daria Elif Farid Greta Hiro Ines Jonas Kavya Liam Mara Nikos Olga Pablo "
    "Quinn Rosa Sven Tariq Uma Viktor Wen Ximena Yusuf Zoe Amara Boris Cleo Dmitri Esme Felix"
).split()
LAST_NAMES = (
    "Abbott Baptiste Castillo Dubois Eriksen Fontaine Gallagher Haddad Ivanova Jensen Kowalski "
    "Lindqvist Moreau Nakamura Okafor Petrov Quispe Rahman Santos Takahashi Underwood Vasquez "
    "Whitfield Xu Yilmaz Zimmermann"
).split()
EMAIL_DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "proton.me")


@dataclass(frozen=True)
class Person:
    """One person of the synthetic world; `app_password` is their password on every app."""

    first_name: str
    last_name: str
    email: str
    phone_number: str
    app_password: str

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    def supervisor_dict(self) -> dict[str, str]:
        """The four fields AppWorld's specs.json and `admin.MainUser.find_one` use."""
        return {
            "first_name": self.first_name,
            "last_name": self.last_name,
            "email": self.email,
            "phone_number": self.phone_number,
        }


def draw_people(rng: random.Random, count: int) -> list[Person]:
    """`count` people with distinct first names (AppWorld's MainUser is unique by first name)."""
    firsts = rng.sample(FIRST_NAMES, count)
    people = []
    for first in firsts:
        last = rng.choice(LAST_NAMES)
        email = f"{first.lower()}.{last.lower()}@{rng.choice(EMAIL_DOMAINS)}"
        phone = f"{rng.randint(200, 989)}{rng.randint(200, 999)}{rng.randint(1000, 9999)}"
        password = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(10))
        people.append(Person(first, last, email, phone, password))
    return people
