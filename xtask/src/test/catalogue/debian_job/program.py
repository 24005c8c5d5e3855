import hashlib, json, re, sys
config = json.load(open(sys.argv[1] + '/data/config.json'))
words = re.findall(r'[a-z]+', open(sys.argv[1] + '/data/words.txt').read())
digest = hashlib.sha256(' '.join(sorted(words)).encode()).hexdigest()
print(config['name'], len(words), digest[:16], json.dumps({'sum': sum(config['values'])}))
