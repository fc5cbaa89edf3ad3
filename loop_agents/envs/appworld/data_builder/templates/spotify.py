"""Spotify scenarios (held out for test_challenge): playlist length (d2), build a playlist (d3)."""

from __future__ import annotations

from datetime import timedelta

from loop_agents.envs.appworld.data_builder.spec import TaskContent, UnitTest
from loop_agents.envs.appworld.data_builder.task_writer import World
from loop_agents.envs.appworld.data_builder.templates.base import (
    ANSWER_TEST,
    NO_ANSWER_TEST,
    NO_CHANGE_TEST,
    Template,
    login_code,
    only_changed_test,
)

ARTISTS = ["The Lanterns", "Mira Vale", "Copper Owls", "Dj Nebula", "Saffron Road", "Kite Theory"]
GENRES = ["pop", "rock", "jazz", "indie", "electronic"]
WORDS = "river light paper moon static velvet echo harbor glass summer ember tide".split()
PLAYLISTS = ["Morning run", "Focus", "Road trip", "Dinner party", "Rainy day", "Throwbacks"]


def _add_catalog(world: World, num_songs: int) -> tuple[list, list]:
    """Artists and songs; about half of the songs are in the supervisor's library."""
    rng, spotify = world.rng, world.models.spotify
    me = world.user_id("spotify", world.supervisor)
    artists = [
        spotify.Artist.create_save(name=name, genre=rng.choice(GENRES)) for name in rng.sample(ARTISTS, 4)
    ]
    songs = []
    for index in range(num_songs):
        artist = rng.choice(artists)
        song = spotify.Song.create_save(
            title=f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {index + 1}",
            artist_ids=[artist.id],
            duration=rng.randint(120, 330),
            release_date=world.now - timedelta(days=rng.randint(30, 3000)),
            genre=artist.genre,
        )
        songs.append(song)
        if rng.random() < 0.6:
            spotify.UserLibrarySong.create_save(user_id=me, song_id=song.id)
    return artists, songs


def playlist_minutes(world: World, variant: int) -> TaskContent:
    rng, spotify = world.rng, world.models.spotify
    me = world.user_id("spotify", world.supervisor)
    _, songs = _add_catalog(world, 12 + variant)
    playlists = {}
    for title in rng.sample(PLAYLISTS, 3):
        playlist = spotify.Playlist.create_save(title=title, user_id=me)
        members = rng.sample(songs, rng.randint(3, 6))
        for song in members:
            spotify.PlaylistSong.create_save(playlist_id=playlist.id, song_id=song.id)
        playlists[title] = members
    title = rng.choice(list(playlists))
    answer = sum(song.duration for song in playlists[title]) // 60
    solution = login_code("spotify") + (
        "\nlibrary = apis.spotify.show_playlist_library(access_token=spotify_token, page_limit=20)\n"
        f"playlist = [p for p in library if p['title'] == {title!r}][0]\n"
        "seconds = sum(apis.spotify.show_song(song_id=s)['duration'] for s in playlist['song_ids'])\n"
        "apis.supervisor.complete_task(answer=seconds // 60)"
    )
    return TaskContent(
        instruction=(
            f"What is the total length of my Spotify playlist '{title}' in whole minutes (rounded down)?"
        ),
        answer=answer,
        tests=[ANSWER_TEST, NO_CHANGE_TEST],
        solution=solution,
        public_data={"playlist": title},
    )


def playlist_from_artist(world: World, variant: int) -> TaskContent:
    spotify, rng = world.models.spotify, world.rng
    me = world.user_id("spotify", world.supervisor)
    artists, songs = _add_catalog(world, 14 + variant)
    library_ids = {link.song_id for link in spotify.UserLibrarySong.all() if link.user_id == me}
    candidates = [a for a in artists if any(a.id in s.artist_ids and s.id in library_ids for s in songs)]
    artist = rng.choice(candidates)
    expected = sorted(s.id for s in songs if artist.id in s.artist_ids and s.id in library_ids)
    title = f"Best of {artist.name}"
    solution = login_code("spotify") + (
        "\nlibrary = []\npage = 0\nwhile True:\n"
        "    batch = apis.spotify.show_song_library(access_token=spotify_token, page_index=page, page_limit=20)\n"
        "    if not batch:\n        break\n    library.extend(batch)\n    page += 1\n"
        f"playlist_id = apis.spotify.create_playlist(title={title!r}, access_token=spotify_token)['playlist_id']\n"
        "for s in library:\n"
        f"    if any(a['name'] == {artist.name!r} for a in s['artists']):\n"
        "        apis.spotify.add_song_to_playlist(playlist_id=playlist_id, song_id=s['song_id'], access_token=spotify_token)\n"
        "apis.supervisor.complete_task()"
    )
    one_playlist = UnitTest(
        "assert exactly one playlist was added, with the requested title.",
        "added, _, _ = models.changed_records('spotify.Playlist')\n"
        "test.case(len(added), '==', 1)\n"
        "test.case(added[0].title, '==', public_data['title'], normalize_text=True)",
    )
    right_songs = UnitTest(
        "assert the new playlist holds exactly the artist's songs from the library.",
        "added, _, _ = models.changed_records('spotify.Playlist')\n"
        "links = [l for l in models.end.spotify.PlaylistSong.all() if l.playlist_id == added[0].id]\n"
        "test.case(sorted(list_of(links, 'song_id')), '==', private_data['song_ids'])",
    )
    return TaskContent(
        instruction=(
            f"Create a Spotify playlist titled '{title}' with every song by {artist.name} that is in "
            "my song library."
        ),
        answer=None,
        tests=[
            NO_ANSWER_TEST,
            one_playlist,
            right_songs,
            only_changed_test(["spotify.Playlist", "spotify.PlaylistSong"]),
        ],
        solution=solution,
        public_data={"title": title, "artist": artist.name},
        private_data={"song_ids": expected},
    )


SPOTIFY_TEMPLATES = (
    Template("spotify_playlist_minutes", ("spotify",), 2, True, playlist_minutes),
    Template("spotify_playlist_from_artist", ("spotify",), 3, True, playlist_from_artist),
)
