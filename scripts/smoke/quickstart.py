"""Prints the first code block of a README section: quickstart.py README.md "## Quick start (Node)" js"""
import re
import sys

readme, heading, lang = sys.argv[1:4]
section = open(readme, encoding="utf-8").read().split(heading + "\n", 1)[1]
print(re.search(r"```" + lang + r"\n(.*?)```", section, re.S).group(1), end="")
