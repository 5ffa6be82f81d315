"""Who may do what: users and their chap-sha1 check, the rights model every
port asks, and the pacing of failed logins.

It decides, it never answers a request itself: `core` and the ports call it.

- `authguard.py`: How fast passwords can be guessed
- `rights.py`: The rights model
- `users.py`: Users, their rights, and the chap-sha1 check of an AUTH request
"""
