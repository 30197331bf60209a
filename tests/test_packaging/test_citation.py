"""CITATION.cff (Citation File Format 1.2.0) cites the CPVT paper, and the
licence of LICENSE and CITATION.cff is one: Apache 2.0."""
import os.path as osp

import yaml

from tests.utils import ROOT

# The paper's authors, in its order (\author of the ICLR 2023 version).
AUTHORS = [('Chu', 'Xiangxiang'), ('Tian', 'Zhi'), ('Zhang', 'Bo'),
           ('Wang', 'Xinlong'), ('Shen', 'Chunhua')]


def _read(name):
    with open(osp.join(ROOT, name)) as f:
        return f.read()


def test_citation_cff_has_the_required_keys_and_the_paper():
    cff = yaml.safe_load(_read('CITATION.cff'))
    # required by the CFF 1.2.0 schema
    assert cff['cff-version'] == '1.2.0'
    assert cff['message'].strip() and cff['title'].strip()
    assert cff['authors'] and all(a.get('name') or a.get('family-names')
                                  for a in cff['authors'])
    scope = {}
    exec(_read(osp.join('mmcpvt', 'version.py')), scope)
    assert str(cff['version']) == scope['__version__']

    paper = cff['preferred-citation']
    assert paper['type'] == 'conference-paper'
    assert paper['title'] == ('Conditional Positional Encodings for Vision '
                              'Transformers')
    assert [(a['family-names'], a['given-names'])
            for a in paper['authors']] == AUTHORS
    assert paper['year'] == 2023
    assert 'ICLR 2023' in paper['conference']['name']
    ids = {i['type']: i['value'] for i in paper['identifiers']}
    assert ids['other'] == 'arXiv:2102.10882'
    assert ids['doi'] == '10.48550/arXiv.2102.10882'
    assert paper['url'] == 'https://arxiv.org/abs/2102.10882'


def test_license_file_is_apache_2():
    """setup.py's licence: tests/test_packaging/test_wheel.py."""
    text = _read('LICENSE')
    lines = text.splitlines()
    assert lines[0] == 'Copyright (c) mmcpvt contributors'
    assert lines[2].strip() == 'Apache License'
    assert lines[3].strip() == 'Version 2.0, January 2004'
    assert 'END OF TERMS AND CONDITIONS' in text
    # the full text: all nine sections of the terms
    for n, title in enumerate(
            ('Definitions', 'Grant of Copyright License',
             'Grant of Patent License', 'Redistribution',
             'Submission of Contributions', 'Trademarks',
             'Disclaimer of Warranty', 'Limitation of Liability',
             'Accepting Warranty or Additional Liability'), 1):
        assert f'   {n}. {title}' in text, title
    # the appendix's notice carries our copyright, not the placeholder
    assert '[yyyy]' not in text
    assert '   Copyright (c) mmcpvt contributors\n' in text
    assert yaml.safe_load(_read('CITATION.cff'))['license'] == 'Apache-2.0'
