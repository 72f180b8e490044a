//! A small element tree built from quick-xml's event reader, keeping the byte
//! offset of every element, attribute and text so that schema errors can point
//! at the right line and column.

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::error::{Locator, ProfileError};
use super::limits::{MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_ELEMENTS};

/// One attribute with its unescaped value and position.
#[derive(Debug, Clone)]
pub(crate) struct Attr {
    pub name: String,
    pub value: String,
    pub pos: usize,
}

/// One element: name, attributes, child elements and its character content.
#[derive(Debug, Clone)]
pub(crate) struct Element {
    pub name: String,
    pub pos: usize,
    pub attrs: Vec<Attr>,
    pub children: Vec<Element>,
    /// Concatenated, unescaped text and CDATA content.
    pub text: String,
    /// Offset of the first non-whitespace character of the content, if any.
    pub text_pos: Option<usize>,
}

/// Parses `input` into its root element.
pub(crate) fn parse_tree(input: &str) -> Result<Element, ProfileError> {
    if input.len() > MAX_DOCUMENT_BYTES {
        return Err(ProfileError::Limit {
            line: 1,
            column: 1,
            message: format!(
                "the document is {} bytes; at most {MAX_DOCUMENT_BYTES} are read",
                input.len()
            ),
        });
    }
    let loc = Locator::new(input);
    let limit = |pos: usize, message: String| {
        let (line, column) = loc.locate(pos);
        ProfileError::Limit {
            line,
            column,
            message,
        }
    };
    let mut elements = 0usize;
    let malformed = |pos: usize, message: String| {
        let (line, column) = loc.locate(pos);
        ProfileError::Malformed {
            line,
            column,
            message,
        }
    };
    let mut reader = Reader::from_str(input);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let start = to_usize(reader.buffer_position());
        let event = reader
            .read_event()
            .map_err(|e| malformed(to_usize(reader.error_position()), e.to_string()))?;
        if let Event::Start(_) | Event::Empty(_) = event {
            elements += 1;
            if elements > MAX_ELEMENTS {
                return Err(limit(start, format!("more than {MAX_ELEMENTS} elements")));
            }
            if stack.len() >= MAX_DEPTH {
                return Err(limit(
                    start,
                    format!("elements nested more than {MAX_DEPTH} deep"),
                ));
            }
        }
        match event {
            Event::Start(tag) => stack.push(open(&tag, start, input, &malformed)?),
            Event::Empty(tag) => {
                let el = open(&tag, start, input, &malformed)?;
                attach(&mut stack, &mut root, el, &malformed)?;
            }
            Event::End(_) => match stack.pop() {
                Some(el) => attach(&mut stack, &mut root, el, &malformed)?,
                None => return Err(malformed(start, "closing tag without opening tag".into())),
            },
            Event::Text(text) => {
                let content = text
                    .unescape()
                    .map_err(|e| malformed(start, e.to_string()))?;
                let lead = content.len() - content.trim_start().len();
                push_text(&mut stack, &content, start + lead, &malformed)?;
            }
            Event::CData(data) => {
                let raw = data.into_inner();
                let content = std::str::from_utf8(&raw)
                    .map_err(|e| malformed(start, e.to_string()))?
                    .to_string();
                push_text(&mut stack, &content, start, &malformed)?;
            }
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(open) = stack.last() {
        return Err(malformed(
            input.len(),
            format!(
                "end of document inside <{}>; expected </{}>",
                open.name, open.name
            ),
        ));
    }
    root.ok_or_else(|| malformed(input.len(), "no root element; expected <grmsJob>".into()))
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn open(
    tag: &BytesStart<'_>,
    start: usize,
    input: &str,
    malformed: &impl Fn(usize, String) -> ProfileError,
) -> Result<Element, ProfileError> {
    let name = String::from_utf8_lossy(tag.name().as_ref()).into_owned();
    let mut attrs = Vec::new();
    for attr in tag.attributes() {
        let attr = attr.map_err(|e| malformed(start, e.to_string()))?;
        let key = attr.key.as_ref();
        let pos = offset_in(input, key).unwrap_or(start);
        let value = attr
            .unescape_value()
            .map_err(|e| malformed(pos, e.to_string()))?
            .into_owned();
        attrs.push(Attr {
            name: String::from_utf8_lossy(key).into_owned(),
            value,
            pos,
        });
    }
    Ok(Element {
        name,
        pos: start,
        attrs,
        children: Vec::new(),
        text: String::new(),
        text_pos: None,
    })
}

/// Byte offset of `part` inside `input` when `part` borrows from it.
fn offset_in(input: &str, part: &[u8]) -> Option<usize> {
    let base = input.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    (at >= base && at + part.len() <= base + input.len()).then(|| at - base)
}

fn attach(
    stack: &mut [Element],
    root: &mut Option<Element>,
    el: Element,
    malformed: &impl Fn(usize, String) -> ProfileError,
) -> Result<(), ProfileError> {
    if let Some(parent) = stack.last_mut() {
        parent.children.push(el);
        return Ok(());
    }
    if root.is_some() {
        return Err(malformed(
            el.pos,
            format!("second root element <{}>; a document has one root", el.name),
        ));
    }
    *root = Some(el);
    Ok(())
}

fn push_text(
    stack: &mut [Element],
    content: &str,
    pos: usize,
    malformed: &impl Fn(usize, String) -> ProfileError,
) -> Result<(), ProfileError> {
    match stack.last_mut() {
        Some(el) => {
            if el.text_pos.is_none() && !content.trim().is_empty() {
                el.text_pos = Some(pos);
            }
            el.text.push_str(content);
            Ok(())
        }
        None if content.trim().is_empty() => Ok(()),
        None => Err(malformed(pos, "text outside the root element".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_tree_with_positions() {
        let doc =
            "<?xml version=\"1.0\"?>\n<a x=\"1 &amp; 2\">\n  <b>t&lt;</b><c/><![CDATA[<raw>]]></a>";
        let root = parse_tree(doc).unwrap();
        assert_eq!(root.name, "a");
        assert_eq!(root.attrs[0].value, "1 & 2");
        assert_eq!(Locator::new(doc).locate(root.attrs[0].pos), (2, 4));
        assert_eq!(root.children.len(), 2);
        assert_eq!(root.children[0].text, "t<");
        assert_eq!(Locator::new(doc).locate(root.children[1].pos), (3, 15));
        assert!(root.text.contains("<raw>"));
    }

    #[test]
    fn reports_malformed_documents() {
        for doc in ["<a><b></a>", "<a>", "", "<a></a><b/>", "<a x=1/>", "x<a/>"] {
            let err = parse_tree(doc).unwrap_err();
            assert!(
                matches!(err, ProfileError::Malformed { .. }),
                "{doc}: {err}"
            );
        }
    }
}
