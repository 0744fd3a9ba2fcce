//! A column chunk's pages with its dictionary page read only when a dictionary-encoded data page
//! needs it. A writer falls back from dictionary to plain encoding once a chunk's dictionary is
//! full (strings of many distinct values: names, ids), so most of such a chunk's pages are plain;
//! a probe of a plain page used to decode the whole dictionary all the same (the column reader
//! takes a dictionary page as it comes), which cost more than the rest of the probe (measured:
//! 250,000 instructions of a 600,000-instruction probe, for a dictionary of about a thousand
//! strings).

use parquet::basic::Encoding;
use parquet::column::page::{Page, PageMetadata, PageReader};
use parquet::errors::{ParquetError, Result};

/// Wraps the pages of a chunk that has a dictionary page; `dictionary` reads that page when the
/// first dictionary-encoded data page is asked for, which then waits until the dictionary page has
/// gone first, as the column reader expects.
pub(super) struct LazyDictionary<P: PageReader, D: FnMut() -> Result<Page> + Send> {
    inner: P,
    dictionary: D,
    given: bool,
    /// A dictionary-encoded data page held back while its dictionary page went first.
    held: Option<Page>,
}

impl<P: PageReader, D: FnMut() -> Result<Page> + Send> LazyDictionary<P, D> {
    pub(super) fn new(inner: P, dictionary: D) -> Self {
        LazyDictionary { inner, dictionary, given: false, held: None }
    }

    /// Passes over the chunk's dictionary page unread (it comes first, if at all).
    fn pass_dictionary(&mut self) -> Result<()> {
        if self.inner.peek_next_page()?.is_some_and(|p| p.is_dict) {
            self.inner.skip_next_page()?;
        }
        Ok(())
    }
}

fn metadata(page: &Page) -> PageMetadata {
    let num_rows = match page {
        Page::DataPageV2 { num_rows, .. } => Some(*num_rows as usize),
        _ => None,
    };
    PageMetadata { num_rows, num_levels: Some(page.num_values() as usize), is_dict: false }
}

impl<P: PageReader, D: FnMut() -> Result<Page> + Send> PageReader for LazyDictionary<P, D> {
    fn get_next_page(&mut self) -> Result<Option<Page>> {
        if let Some(page) = self.held.take() {
            return Ok(Some(page));
        }
        self.pass_dictionary()?;
        match self.inner.get_next_page()? {
            Some(page)
                if !self.given && matches!(page.encoding(), Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY) =>
            {
                let dictionary = (self.dictionary)()?;
                if !matches!(dictionary, Page::DictionaryPage { .. }) {
                    return Err(ParquetError::General("a dictionary-encoded chunk has no dictionary page".into()));
                }
                self.given = true;
                self.held = Some(page);
                Ok(Some(dictionary))
            }
            page => Ok(page),
        }
    }

    fn peek_next_page(&mut self) -> Result<Option<PageMetadata>> {
        if let Some(page) = &self.held {
            return Ok(Some(metadata(page)));
        }
        self.pass_dictionary()?;
        self.inner.peek_next_page()
    }

    fn skip_next_page(&mut self) -> Result<()> {
        if self.held.take().is_some() {
            return Ok(());
        }
        self.pass_dictionary()?;
        self.inner.skip_next_page()
    }

    fn at_record_boundary(&mut self) -> Result<bool> {
        match self.held {
            Some(_) => Ok(true), // (a page held back is a whole page)
            None => self.inner.at_record_boundary(),
        }
    }
}

impl<P: PageReader, D: FnMut() -> Result<Page> + Send> Iterator for LazyDictionary<P, D> {
    type Item = Result<Page>;
    fn next(&mut self) -> Option<Result<Page>> {
        self.get_next_page().transpose()
    }
}
